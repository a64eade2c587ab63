package main

import (
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/machina-dev/machina/internal/cloud/api"
)

// TestMachineOf: the checker finds an instance's Machine by the providerID either API records,
// else by the tag its launcher put on it (machina's controllers, or CAPA), on either platform.
func TestMachineOf(t *testing.T) {
	s := &snapshot{
		mapiM:  map[string]*machinev1beta1.Machine{"m-recorded": {Spec: machinev1beta1.MachineSpec{ProviderID: ptr.To("aws:///us-east-1a/i-1")}}},
		capiM2: map[string]*clusterv1.Machine{"c-recorded": {Spec: clusterv1.MachineSpec{ProviderID: "sim://sim-east-1/sim-east-1a/i-2"}}},
	}
	for _, tc := range []struct {
		what string
		i    api.Instance
		want string
	}{
		{"recorded by the Machine API", api.Instance{ProviderID: "aws:///us-east-1a/i-1", Tags: map[string]string{"machina.dev/machine": "openshift-machine-api/other"}}, "m-recorded"},
		{"recorded by the Cluster API", api.Instance{ProviderID: "sim://sim-east-1/sim-east-1a/i-2"}, "c-recorded"},
		{"launched by machina's actuator", api.Instance{ProviderID: "aws:///us-east-1a/i-3", Tags: map[string]string{"machina.dev/machine": "openshift-machine-api/w-1"}}, "w-1"},
		{"launched by CAPA", api.Instance{ProviderID: "aws:///us-east-1b/i-4", Tags: map[string]string{"MachineName": "openshift-cluster-api/w-2", "Name": "w-2"}}, "w-2"},
		{"no launcher's tag", api.Instance{ProviderID: "aws:///us-east-1b/i-5", Tags: map[string]string{"Name": "w-3"}}, ""},
	} {
		if got := s.machineOf(tc.i); got != tc.want {
			t.Errorf("%s: machineOf = %q, want %q", tc.what, got, tc.want)
		}
	}
}
