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

// A clone whose readiness the Machine controller has reported exists and is not read again;
// one reported missing, failing to be read, or not reported yet is.
func TestUnconfirmedClones(t *testing.T) {
	cond := func(typ, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: reason}
	}
	infra := func(reason string) metav1.Condition {
		return cond(clusterv1.MachineInfrastructureReadyCondition, reason)
	}
	boot := func(reason string) metav1.Condition {
		return cond(clusterv1.MachineBootstrapConfigReadyCondition, reason)
	}
	for name, tc := range map[string]struct {
		withConfig bool
		conditions []metav1.Condition
		want       clones
	}{
		"nothing reported":             {true, nil, clones{infra: true, boot: true}},
		"no bootstrap config":          {false, nil, clones{infra: true}},
		"both not ready yet":           {true, []metav1.Condition{infra(clusterv1.MachineInfrastructureNotReadyReason), boot(clusterv1.MachineBootstrapConfigNotReadyReason)}, clones{}},
		"InfraMachine does not exist":  {true, []metav1.Condition{infra(clusterv1.MachineInfrastructureDoesNotExistReason), boot(clusterv1.MachineBootstrapConfigNotReadyReason)}, clones{infra: true}},
		"InfraMachine unreadable":      {false, []metav1.Condition{infra(clusterv1.MachineInfrastructureInternalErrorReason)}, clones{infra: true}},
		"bootstrap config missing":     {true, []metav1.Condition{infra(clusterv1.MachineInfrastructureNotReadyReason), boot(clusterv1.MachineBootstrapConfigDoesNotExistReason)}, clones{boot: true}},
		"condition without a reason":   {false, []metav1.Condition{infra("")}, clones{infra: true}},
		"bootstrap data provided only": {true, []metav1.Condition{boot(clusterv1.MachineBootstrapDataSecretProvidedReason)}, clones{infra: true}},
	} {
		m := &clusterv1.Machine{Status: clusterv1.MachineStatus{Conditions: tc.conditions}}
		if tc.withConfig {
			m.Spec.Bootstrap.ConfigRef = clusterv1.ContractVersionedObjectReference{APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfig", Name: "m"}
		}
		if got := unconfirmedClones(m); got != tc.want {
			t.Errorf("%s: unconfirmedClones = %+v, want %+v", name, got, tc.want)
		}
	}
}
