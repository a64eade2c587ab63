package simmachineset

import (
	"encoding/json"
	"reflect"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"

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
	again := ApplyCapacity(copyMap(got), arm)
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

func copyMap(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func machineSetWith(raw string) *machinev1beta1.MachineSet {
	ms := &machinev1beta1.MachineSet{}
	if raw != "" {
		ms.Spec.Template.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: json.RawMessage(raw)}
	}
	return ms
}

func TestProviderSpec(t *testing.T) {
	cases := []struct {
		name    string
		raw     string
		sim     bool
		wantErr bool
		itype   string
	}{
		{"none", "", false, false, ""},
		{"sim", `{"apiVersion":"infrastructure.machina.dev/v1alpha1","kind":"SimMachineProviderSpec","instanceType":"s1.large"}`, true, false, "s1.large"},
		{"no type meta", `{"instanceType":"a1.large"}`, true, false, "a1.large"},
		{"aws", `{"apiVersion":"machine.openshift.io/v1beta1","kind":"AWSMachineProviderConfig","instanceType":"m6i.xlarge"}`, false, false, ""},
		{"other group, no kind", `{"apiVersion":"example.com/v1","instanceType":"x"}`, false, false, ""},
		{"sim, wrong field type", `{"kind":"SimMachineProviderSpec","instanceType":7}`, true, true, ""},
		{"not an object", `"text"`, false, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ps, sim, err := providerSpec(machineSetWith(tc.raw))
			if sim != tc.sim || (err != nil) != tc.wantErr {
				t.Fatalf("sim=%v err=%v, want sim=%v err=%v", sim, err, tc.sim, tc.wantErr)
			}
			if tc.itype != "" && (ps == nil || ps.InstanceType != tc.itype) {
				t.Fatalf("providerSpec %+v, want instanceType %s", ps, tc.itype)
			}
		})
	}
}
