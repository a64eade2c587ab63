package machine

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// healthyMachine has every condition Ready needs, True.
func healthyMachine() *clusterv1.Machine {
	m := &clusterv1.Machine{}
	for _, t := range []string{clusterv1.MachineBootstrapConfigReadyCondition, clusterv1.MachineInfrastructureReadyCondition,
		clusterv1.MachineNodeHealthyCondition} {
		setCondition(m, t, metav1.ConditionTrue, "Fine", "")
	}
	return m
}

func TestReadyHonoursReadinessGates(t *testing.T) {
	m := healthyMachine()
	m.Spec.ReadinessGates = []clusterv1.MachineReadinessGate{{ConditionType: "AgentReady"},
		{ConditionType: "Degraded", Polarity: clusterv1.NegativePolarityCondition}}
	setReady(m)
	c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineReadyCondition)
	if c.Status != metav1.ConditionFalse || c.Reason != clusterv1.MachineNotReadyReason ||
		c.Message != "* AgentReady: Condition not yet reported\n* Degraded: Condition not yet reported" {
		t.Fatalf("Ready = %s: %s, want False naming both gates", c.Status, c.Message)
	}
	setCondition(m, "AgentReady", metav1.ConditionTrue, "Up", "")
	setCondition(m, "Degraded", metav1.ConditionTrue, "Broken", "")
	setReady(m)
	if c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineReadyCondition); c.Status != metav1.ConditionFalse ||
		c.Message != "* Degraded: Broken" {
		t.Fatalf("Ready = %s: %s, want False for the negative gate", c.Status, c.Message)
	}
	setCondition(m, "Degraded", metav1.ConditionFalse, "Fine", "")
	setReady(m)
	if !isTrue(m, clusterv1.MachineReadyCondition) || !isTrue(m, clusterv1.MachineAvailableCondition) {
		t.Fatalf("gates met: conditions %+v", m.Status.Conditions)
	}
}

// Ready is False, not Unknown, while a condition it needs is Unknown; a Machine being deleted
// is not Ready whatever its conditions say.
func TestReadyNeverUnknown(t *testing.T) {
	m := healthyMachine()
	setCondition(m, clusterv1.MachineNodeHealthyCondition, metav1.ConditionUnknown, clusterv1.MachineNodeHealthUnknownReason, "Node n: Ready is Unknown")
	setReady(m)
	if c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineReadyCondition); c.Status != metav1.ConditionFalse ||
		c.Message != "* NodeHealthy: Node n: Ready is Unknown" {
		t.Fatalf("Ready = %s: %q, want False naming NodeHealthy", c.Status, c.Message)
	}
	m = healthyMachine()
	m.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	setReady(m)
	if c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineReadyCondition); c.Status != metav1.ConditionFalse ||
		c.Message != "the Machine is being deleted" {
		t.Fatalf("deleted Machine: Ready = %s: %q", c.Status, c.Message)
	}
}

func TestAvailableWaitsForMinReadySeconds(t *testing.T) {
	m := healthyMachine()
	m.Spec.MinReadySeconds = ptr.To[int32](30)
	// Ready's last transition time is stored in whole seconds, as the API server keeps it.
	if wait := setReady(m); wait <= 28*time.Second || wait > 30*time.Second {
		t.Fatalf("wait %v, want about 30s", wait)
	}
	c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineAvailableCondition)
	if c.Status != metav1.ConditionFalse || c.Reason != clusterv1.MachineWaitingForMinReadySecondsReason {
		t.Fatalf("Available = %s/%s, want False/%s", c.Status, c.Reason, clusterv1.MachineWaitingForMinReadySecondsReason)
	}
	ready := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineReadyCondition)
	if wait := setAvailable(m, ready.LastTransitionTime.Add(30*time.Second)); wait != 0 || !isTrue(m, clusterv1.MachineAvailableCondition) {
		t.Fatalf("after 30s: wait %v, Available %+v", wait, meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineAvailableCondition))
	}
	m.Spec.MinReadySeconds = nil
	if wait := setAvailable(m, ready.LastTransitionTime.Time); wait != 0 || !isTrue(m, clusterv1.MachineAvailableCondition) {
		t.Fatalf("no minReadySeconds: wait %v", wait)
	}
}
