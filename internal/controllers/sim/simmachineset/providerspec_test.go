package simmachineset

import (
	"encoding/json"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
)

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
