package cluster

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/external"
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

// While the Cluster is deleted, Available leaves out an InfraCluster that is going away: only
// Deleting is named.
func TestAvailableWhileDeleting(t *testing.T) {
	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: ptr.To(metav1.Now())}}
	for _, ty := range []string{clusterv1.ClusterRemoteConnectionProbeCondition, clusterv1.ClusterWorkersAvailableCondition} {
		setCondition(cl, ty, metav1.ConditionTrue, "Fine", "")
	}
	setCondition(cl, clusterv1.ClusterInfrastructureReadyCondition, metav1.ConditionFalse, clusterv1.ClusterInfrastructureDeletedReason, "gone")
	setCondition(cl, clusterv1.ClusterDeletingCondition, metav1.ConditionTrue, WaitingForInfrastructureDeletionReason, "waiting")
	setAvailable(cl)
	c := conditions.Get(cl, clusterv1.ClusterAvailableCondition)
	if c.Status != metav1.ConditionFalse || c.Reason != clusterv1.ClusterNotAvailableReason || c.Message != "* Deleting: waiting" {
		t.Errorf("Available = %s/%s %q, want False/NotAvailable naming Deleting alone", c.Status, c.Reason, c.Message)
	}
}

// The control plane object joins the scaling aggregation under its own kind and name, when
// it reports the condition.
func TestScalingNamesTheControlPlane(t *testing.T) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("controlplane.cluster.x-k8s.io/v1beta2")
	u.SetKind("KubeadmControlPlane")
	u.SetName("cp")
	cp := &controlPlaneSource{Object: &external.Object{Unstructured: u}, reported: []metav1.Condition{
		{Type: clusterv1.ScalingUpCondition, Status: metav1.ConditionTrue, Reason: "ScalingUp", Message: "Scaling up from 1 to 3 replicas"}}}
	cl := &clusterv1.Cluster{}
	setWorkerConditions(cl, &descendants{}, cp)
	c := conditions.Get(cl, clusterv1.ClusterScalingUpCondition)
	if c.Status != metav1.ConditionTrue || c.Reason != clusterv1.ClusterScalingUpReason || c.Message != "* KubeadmControlPlane cp: Scaling up from 1 to 3 replicas" {
		t.Errorf("ScalingUp = %s/%s %q", c.Status, c.Reason, c.Message)
	}
	if c := conditions.Get(cl, clusterv1.ClusterScalingDownCondition); c.Status != metav1.ConditionFalse || c.Reason != clusterv1.ClusterNotScalingDownReason {
		t.Errorf("ScalingDown without sources = %s/%s, want False/NotScalingDown", c.Status, c.Reason)
	}
}
