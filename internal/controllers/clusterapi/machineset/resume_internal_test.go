package machineset

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// Only a Machine this controller created, alive and never provisioned, is looked after: an
// adopted one (no template hash) or one whose InfraMachine has another name is not.
func TestAwaitsClones(t *testing.T) {
	base := func() *clusterv1.Machine {
		return &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", Annotations: map[string]string{TemplateHashAnnotation: "h"}},
			Spec: clusterv1.MachineSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{Kind: "SimMachine", Name: "m"}}}
	}
	now := metav1.Now()
	for name, tc := range map[string]struct {
		mutate func(*clusterv1.Machine)
		want   bool
	}{
		"created here, not provisioned": {func(*clusterv1.Machine) {}, true},
		"adopted":                       {func(m *clusterv1.Machine) { m.Annotations = nil }, false},
		"deleting":                      {func(m *clusterv1.Machine) { m.DeletionTimestamp = &now }, false},
		"has a providerID":              {func(m *clusterv1.Machine) { m.Spec.ProviderID = "sim://1" }, false},
		"infrastructure provisioned": {func(m *clusterv1.Machine) {
			m.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
		}, false},
		"InfraMachine of another name": {func(m *clusterv1.Machine) { m.Spec.InfrastructureRef.Name = "other" }, false},
	} {
		m := base()
		tc.mutate(m)
		if got := awaitsClones(m); got != tc.want {
			t.Errorf("%s: awaitsClones = %v, want %v", name, got, tc.want)
		}
	}
}

func TestSooner(t *testing.T) {
	for _, tc := range []struct{ a, b, want time.Duration }{
		{0, 0, 0}, {0, time.Second, time.Second}, {time.Second, 0, time.Second}, {2 * time.Second, time.Second, time.Second},
		{time.Second, 2 * time.Second, time.Second},
	} {
		if got := sooner(tc.a, tc.b); got != tc.want {
			t.Errorf("sooner(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
