package synccommon

import (
	"testing"

	"k8s.io/utils/ptr"
	capav1 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
)

// A spec copied from a side that names no instance keeps the providerID the InfraMachine
// recorded, for providerID fields of either type; a copied providerID wins.
func TestKeepProviderID(t *testing.T) {
	sim := func(pid string) *infrav1.SimMachine {
		return &infrav1.SimMachine{Spec: infrav1.SimMachineSpec{ProviderID: pid}}
	}
	for _, tc := range []struct{ was, copied, want string }{
		{"sim://r/z/i-1", "", "sim://r/z/i-1"}, {"sim://r/z/i-1", "sim://r/z/i-2", "sim://r/z/i-2"}, {"", "", ""},
	} {
		obj := sim(tc.copied)
		KeepProviderID(obj, sim(tc.was))
		if obj.Spec.ProviderID != tc.want {
			t.Errorf("SimMachine: was %q, copied %q: got %q, want %q", tc.was, tc.copied, obj.Spec.ProviderID, tc.want)
		}
	}
	aws := func(pid *string) *capav1.AWSMachine {
		return &capav1.AWSMachine{Spec: capav1.AWSMachineSpec{ProviderID: pid}}
	}
	for _, tc := range []struct{ was, copied, want *string }{
		{ptr.To("aws:///z/i-1"), nil, ptr.To("aws:///z/i-1")}, {ptr.To("aws:///z/i-1"), ptr.To(""), ptr.To("aws:///z/i-1")},
		{ptr.To("aws:///z/i-1"), ptr.To("aws:///z/i-2"), ptr.To("aws:///z/i-2")}, {nil, nil, nil},
	} {
		obj := aws(tc.copied)
		KeepProviderID(obj, aws(tc.was))
		if ptr.Deref(obj.Spec.ProviderID, "<nil>") != ptr.Deref(tc.want, "<nil>") {
			t.Errorf("AWSMachine: was %v, copied %v: got %v, want %v", ptr.Deref(tc.was, "<nil>"), ptr.Deref(tc.copied, "<nil>"),
				ptr.Deref(obj.Spec.ProviderID, "<nil>"), ptr.Deref(tc.want, "<nil>"))
		}
	}
}
