package cluster

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/machina-dev/machina/internal/controllers/internal/coalesce"
)

func machine(name string, trueConds ...string) *clusterv1.Machine {
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour))}}
	for _, t := range []string{clusterv1.MachineReadyCondition, clusterv1.MachineAvailableCondition, clusterv1.MachineUpToDateCondition} {
		s := metav1.ConditionFalse
		for _, tc := range trueConds {
			if tc == t {
				s = metav1.ConditionTrue
			}
		}
		meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: "R", Message: "not " + t})
	}
	return m
}

// status.workers sums MachineDeployments and MachineSets of their own with Machines of their
// own (one desired replica each); counters nobody reports stay unset.
func TestWorkersCountsAndMachinesConditions(t *testing.T) {
	cl := &clusterv1.Cluster{}
	d := &descendants{
		deployments: []clusterv1.MachineDeployment{{Spec: clusterv1.MachineDeploymentSpec{Replicas: ptr.To[int32](3)},
			Status: clusterv1.MachineDeploymentStatus{Replicas: ptr.To[int32](3), ReadyReplicas: ptr.To[int32](2)}}},
		sets: []clusterv1.MachineSet{{Spec: clusterv1.MachineSetSpec{Replicas: ptr.To[int32](1)},
			Status: clusterv1.MachineSetStatus{Replicas: ptr.To[int32](1), ReadyReplicas: ptr.To[int32](1)}}},
	}
	ready := machine("solo-ready", clusterv1.MachineReadyCondition, clusterv1.MachineUpToDateCondition)
	d.standalone = []*clusterv1.Machine{ready, machine("solo-down")}
	d.workers = append([]*clusterv1.Machine{machine("ms-a"), machine("ms-b")}, d.standalone...)
	setWorkers(cl, d)
	w := cl.Status.Workers
	if *w.DesiredReplicas != 6 || *w.Replicas != 6 || *w.ReadyReplicas != 4 || *w.AvailableReplicas != 0 || *w.UpToDateReplicas != 1 {
		t.Errorf("workers = desired %d replicas %d ready %d available %d upToDate %d, want 6 6 4 0 1",
			*w.DesiredReplicas, *w.Replicas, *w.ReadyReplicas, *w.AvailableReplicas, *w.UpToDateReplicas)
	}
	setMachinesConditions(cl, d)
	c := meta.FindStatusCondition(cl.Status.Conditions, clusterv1.ClusterWorkerMachinesReadyCondition)
	if c.Status != metav1.ConditionFalse || c.Message != "* Machines ms-a, ms-b, solo-down: not Ready" {
		t.Errorf("WorkerMachinesReady = %s %q, want False naming the three Machines that are not Ready", c.Status, c.Message)
	}
	if c := meta.FindStatusCondition(cl.Status.Conditions, clusterv1.ClusterControlPlaneMachinesReadyCondition); c.Status != metav1.ConditionTrue ||
		c.Reason != clusterv1.ClusterControlPlaneMachinesReadyNoReplicasReason {
		t.Errorf("ControlPlaneMachinesReady without control-plane Machines = %s/%s, want True/NoReplicas", c.Status, c.Reason)
	}
}

// An aggregated message names up to three sources per message, the most shared message
// first, at most three lines, and counts the sources left out.
func TestAggregateMessage(t *testing.T) {
	var srcs []source
	for i, msg := range []string{"disk", "net", "disk", "cpu", "mem", "disk", "disk"} {
		srcs = append(srcs, source{kind: "Machine", name: string(rune('a' + i)), conditions: []metav1.Condition{
			{Type: clusterv1.ReadyCondition, Status: metav1.ConditionFalse, Message: msg}}})
	}
	srcs = append(srcs, source{kind: "MachineSet", name: "ms"})
	o := aggregate(srcs, clusterv1.ReadyCondition, false)
	want := "* Machines a, c, f, ... (1 more): disk\n* Machine d: cpu\n* Machine e: mem\nAnd 1 Machine with other issues"
	if !o.issue || o.message != want {
		t.Errorf("aggregate = issue %v %q, want the issues only:\n%s", o.issue, o.message, want)
	}
}

// Available needs ControlPlaneAvailable only when the Cluster has a control plane object, and
// honours availability gates of either polarity.
func TestAvailableSummary(t *testing.T) {
	cl := &clusterv1.Cluster{}
	for _, ty := range []string{clusterv1.ClusterRemoteConnectionProbeCondition, clusterv1.ClusterInfrastructureReadyCondition,
		clusterv1.ClusterWorkersAvailableCondition} {
		setCondition(cl, ty, metav1.ConditionTrue, "Fine", "")
	}
	setCondition(cl, clusterv1.ClusterDeletingCondition, metav1.ConditionFalse, clusterv1.ClusterNotDeletingReason, "")
	setAvailable(cl)
	if !meta.IsStatusConditionTrue(cl.Status.Conditions, clusterv1.ClusterAvailableCondition) {
		t.Fatalf("Available without a control plane object: %+v", meta.FindStatusCondition(cl.Status.Conditions, clusterv1.ClusterAvailableCondition))
	}
	cl.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.example", Kind: "CP", Name: "cp"}
	cl.Spec.AvailabilityGates = []clusterv1.ClusterAvailabilityGate{{ConditionType: "Degraded", Polarity: clusterv1.NegativePolarityCondition}}
	setCondition(cl, "Degraded", metav1.ConditionTrue, "Broken", "disk full")
	setAvailable(cl)
	c := meta.FindStatusCondition(cl.Status.Conditions, clusterv1.ClusterAvailableCondition)
	if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "* Degraded: disk full") ||
		!strings.Contains(c.Message, "* ControlPlaneAvailable: Condition not yet reported") {
		t.Errorf("Available = %s %q, want False naming the negative gate and the missing ControlPlaneAvailable", c.Status, c.Message)
	}
}

// A status change of counters or messages alone within StatusInterval of the last write is
// held back; a condition's status change goes out at once; no change needs no write.
func TestStatusWritesOnlyOnChange(t *testing.T) {
	r := &Reconciler{writes: coalesce.StatusThrottle{Interval: StatusInterval}}
	key := types.NamespacedName{Namespace: "ns", Name: "c"}
	before := &clusterv1.Cluster{}
	setCondition(before, clusterv1.ClusterWorkersAvailableCondition, metav1.ConditionFalse, "NotAvailable", "* md-a: 1 of 2")
	if wait := r.holdStatus(key, before, before.DeepCopy()); wait != 0 {
		t.Errorf("no change: hold %s, want 0", wait)
	}
	first := before.DeepCopy()
	first.Status.Workers = &clusterv1.WorkersStatus{Replicas: ptr.To[int32](1)}
	if wait := r.holdStatus(key, before, first); wait != 0 {
		t.Fatalf("first write held for %s", wait)
	}
	second := first.DeepCopy()
	second.Status.Workers.Replicas = ptr.To[int32](2)
	setCondition(second, clusterv1.ClusterWorkersAvailableCondition, metav1.ConditionFalse, "NotAvailable", "* md-a: 2 of 2")
	if wait := r.holdStatus(key, first, second); wait <= 0 || wait > StatusInterval {
		t.Errorf("counter and message change right after a write: hold %s, want (0, %s]", wait, StatusInterval)
	}
	third := second.DeepCopy()
	setCondition(third, clusterv1.ClusterWorkersAvailableCondition, metav1.ConditionTrue, "Available", "")
	if wait := r.holdStatus(key, first, third); wait != 0 {
		t.Errorf("condition status change: hold %s, want 0", wait)
	}
}
