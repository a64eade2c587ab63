// Package convert translates machine objects between the OpenShift Machine API
// (machine.openshift.io/v1beta1) and the Cluster API (cluster.x-k8s.io/v1beta2).
//
// The package is pure: it performs no I/O and talks to no API server. Callers pass the
// objects and a Context describing the cluster (its Cluster API name, the namespaces and the
// infrastructure Platform), and get back the converted objects, the lossy-but-safe choices
// made on the way (Warnings) and every value that could not be carried across
// (field.ErrorList with full paths). When errors are returned the converted objects are nil.
//
// The platform-specific part of a Machine (the Machine API providerSpec, the Cluster API
// InfraMachine and InfraMachineTemplate) is handled by a Platform implementation; see the
// providers subpackages. A new platform is one package there: one file per direction
// (ToInfra, FromInfra); an InfraTypes naming its InfraMachine and InfraMachineTemplate Go
// types, from which NewInfraKinds builds the rest of Platform (the kinds, wrapping a spec in
// either object and splitting one back); and, in provider.go, Provider(): the platform's one
// description to the rest of machina (a platform.Provider, taking its kinds from the same
// InfraKinds), which internal/provider lists in its registry. Nothing under internal/convert
// depends on that registry; what does, the reading of manifests for `machina convert`, is
// internal/document, above it.
//
// Conversion is deterministic: the same input always yields byte-identical output, so sync
// controllers can compare the result against what is stored without spurious updates.
package convert
