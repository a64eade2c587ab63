package machineset

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
)

// status.versions counts every Machine of the set, those being deleted included, under its
// Node's kubelet version or else its spec.version, lowest version first; a Machine with
// neither is not counted, and a set without versions has none.
func TestUpdateStatusVersions(t *testing.T) {
	ms := &clusterv1.MachineSet{Spec: clusterv1.MachineSetSpec{Replicas: ptr.To[int32](3)}}
	withKubelet := machineAt("a", time.Hour, func(m *clusterv1.Machine) {
		m.Spec.Version = "v1.33.0"
		m.Status.NodeInfo = &corev1.NodeSystemInfo{KubeletVersion: "v1.32.5"}
	})
	newSpec := machineAt("b", time.Minute, func(m *clusterv1.Machine) { m.Spec.Version = "v1.33.0" })
	deleting := machineAt("c", time.Hour, func(m *clusterv1.Machine) {
		m.Spec.Version = "v1.32.5"
		m.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	})
	noVersion := machineAt("d", time.Hour, nil)
	r := &Reconciler{}
	r.updateStatus(ms, []*clusterv1.Machine{newSpec, withKubelet, deleting, noVersion}, nil)
	want := []clusterv1.StatusVersion{{Version: "v1.32.5", Replicas: 2}, {Version: "v1.33.0", Replicas: 1}}
	if fmt.Sprint(ms.Status.Versions) != fmt.Sprint(want) {
		t.Errorf("versions %v, want %v", ms.Status.Versions, want)
	}
	if *ms.Status.Replicas != 4 {
		t.Errorf("replicas %d, want 4", *ms.Status.Replicas)
	}

	r.updateStatus(ms, []*clusterv1.Machine{noVersion}, nil)
	if ms.Status.Versions != nil {
		t.Errorf("versions %v after the versioned Machines left, want none", ms.Status.Versions)
	}
}

// MachinesReady: a new Machine whose Ready is not reported yet counts as not ready (and the
// set looks again when its grace ends), an old one as unknown; a Machine in remediation
// makes Remediating True, naming it.
func TestUpdateStatusReadinessAndRemediation(t *testing.T) {
	ms := &clusterv1.MachineSet{Spec: clusterv1.MachineSetSpec{Replicas: ptr.To[int32](3)}}
	ready := machineAt("a", time.Hour, nil)
	young := machineAt("b", time.Second, func(m *clusterv1.Machine) { m.Status.Conditions = nil })
	old := machineAt("c", time.Hour, func(m *clusterv1.Machine) {
		m.Status.Conditions = append(m.Status.Conditions, metav1.Condition{Type: clusterv1.MachineOwnerRemediatedCondition,
			Status: metav1.ConditionFalse, Reason: clusterv1.MachineOwnerRemediatedWaitingForRemediationReason, Message: "Waiting for remediation"})
		m.Status.Conditions[0].Status = metav1.ConditionUnknown
		m.Status.Conditions[0].Message = "Node lost"
	})
	r := &Reconciler{}
	next := r.updateStatus(ms, []*clusterv1.Machine{ready, young, old}, nil)
	if next <= 0 || next > newMachineGrace {
		t.Errorf("next pass in %s, want within the grace of the new Machine", next)
	}
	c := conditions.Get(ms, clusterv1.MachineSetMachinesReadyCondition)
	if c.Status != metav1.ConditionFalse || c.Reason != clusterv1.MachineSetMachinesNotReadyReason ||
		c.Message != "* Machine b: Condition Ready not yet reported\n* Machine c: Node lost" {
		t.Errorf("MachinesReady = %s/%s %q, want False/NotReady naming b, then c", c.Status, c.Reason, c.Message)
	}
	c = conditions.Get(ms, clusterv1.MachineSetRemediatingCondition)
	if c.Status != metav1.ConditionTrue || c.Reason != clusterv1.MachineSetRemediatingReason || c.Message != "* Machine c: Waiting for remediation" {
		t.Errorf("Remediating = %s/%s %q", c.Status, c.Reason, c.Message)
	}

	if next := r.updateStatus(ms, []*clusterv1.Machine{ready, old}, nil); next != 0 {
		t.Errorf("next pass in %s without a new Machine, want 0", next)
	}
	if c := conditions.Get(ms, clusterv1.MachineSetMachinesReadyCondition); c.Status != metav1.ConditionUnknown ||
		c.Reason != clusterv1.MachineSetMachinesReadyUnknownReason || c.Message != "* Machine c: Node lost" {
		t.Errorf("MachinesReady = %s/%s %q, want Unknown naming c", c.Status, c.Reason, c.Message)
	}
}
