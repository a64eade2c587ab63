package main_test

import "k8s.io/apimachinery/pkg/runtime"

func rawExt(s string) *runtime.RawExtension { return &runtime.RawExtension{Raw: []byte(s)} }
