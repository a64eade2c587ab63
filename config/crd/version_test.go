package crd_test

// controllerGenVersion must match CONTROLLER_GEN_VERSION in the Makefile.
const controllerGenVersion = "v0.23.0"
