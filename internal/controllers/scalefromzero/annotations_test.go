package scalefromzero

import (
	"maps"
	"reflect"
	"testing"

	"github.com/machina-dev/machina/internal/cloud/api"
)

func TestApplyAndRemoveCapacity(t *testing.T) {
	gpu := api.InstanceType{Name: "g1.xlarge", VCPU: 8, MemoryMiB: 61440, GPU: 1, Architecture: "amd64"}
	got := ApplyCapacity(nil, gpu)
	want := map[string]string{CPUAnnotation: "8", MemoryAnnotation: "61440", GPUAnnotation: "1", LabelsAnnotation: "kubernetes.io/arch=amd64"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fresh: %v, want %v", got, want)
	}

	// User entries in the labels annotation are kept in place; the arch entry is replaced.
	a := map[string]string{"keep": "me", LabelsAnnotation: "team=blue, kubernetes.io/arch=amd64,tier=gpu,kubernetes.io/arch=s390x"}
	arm := api.InstanceType{Name: "a1.large", VCPU: 4, MemoryMiB: 8192, Architecture: "arm64"}
	got = ApplyCapacity(a, arm)
	want = map[string]string{"keep": "me", CPUAnnotation: "4", MemoryAnnotation: "8192", GPUAnnotation: "0",
		LabelsAnnotation: "team=blue,kubernetes.io/arch=arm64,tier=gpu"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("merge: %v, want %v", got, want)
	}
	// Applying again is a no-op (no write loop).
	again := ApplyCapacity(maps.Clone(got), arm)
	if !reflect.DeepEqual(again, got) {
		t.Fatalf("not idempotent: %v then %v", got, again)
	}

	got = RemoveCapacity(got)
	want = map[string]string{"keep": "me", LabelsAnnotation: "team=blue,tier=gpu"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("remove: %v, want %v", got, want)
	}
	if got := RemoveCapacity(ApplyCapacity(nil, gpu)); got != nil {
		t.Fatalf("remove of only ours: %v, want nil", got)
	}
	// Architecture defaults to amd64 like the catalogue does.
	if got := ApplyCapacity(nil, api.InstanceType{VCPU: 1, MemoryMiB: 1})[LabelsAnnotation]; got != "kubernetes.io/arch=amd64" {
		t.Fatalf("default arch: %q", got)
	}
}
