package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/conds"
)

// newMachineGrace: a Machine younger than this without an UpToDate condition is left out of
// the MachinesUpToDate conditions, so they do not flicker while its controller catches up.
const newMachineGrace = 10 * time.Second

// descendants are the Cluster's objects its status is computed from.
type descendants struct {
	deployments []clusterv1.MachineDeployment
	sets        []clusterv1.MachineSet // not controlled by a MachineDeployment
	pools       []clusterv1.MachinePool
	// controlPlane and workers: Machines with and without the control-plane label; workers
	// leaves out MachinePool Machines, as upstream does.
	controlPlane, workers []*clusterv1.Machine
	// standalone workers: controlled by nothing but (possibly) the Cluster.
	standalone []*clusterv1.Machine
}

func (r *Reconciler) listDescendants(ctx context.Context, cl *clusterv1.Cluster) (*descendants, error) {
	// Read only, for counts and conditions: the cached objects are shared, not copied (the
	// Cluster is looked at on its Machines' changes; deep copies of every Machine on each
	// pass were a seventh of the manager's CPU at 3000 Machines).
	opts := []client.ListOption{client.InNamespace(cl.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cl.Name},
		client.UnsafeDisableDeepCopy}
	var mds clusterv1.MachineDeploymentList
	var mss clusterv1.MachineSetList
	var mps clusterv1.MachinePoolList
	var ms clusterv1.MachineList
	for _, l := range []client.ObjectList{&mds, &mss, &mps, &ms} {
		if err := r.Client.List(ctx, l, opts...); err != nil {
			return nil, err
		}
	}
	r.pace.Passed(client.ObjectKeyFromObject(cl), len(mds.Items)+len(mss.Items)+len(mps.Items)+len(ms.Items))
	d := &descendants{deployments: mds.Items, pools: mps.Items}
	for _, s := range mss.Items {
		if ref := metav1.GetControllerOf(&s); ref == nil || ref.Kind != "MachineDeployment" {
			d.sets = append(d.sets, s)
		}
	}
	for i := range ms.Items {
		m := &ms.Items[i]
		switch _, cp := m.Labels[clusterv1.MachineControlPlaneLabel]; {
		case cp:
			d.controlPlane = append(d.controlPlane, m)
		case m.Labels[clusterv1.MachinePoolNameLabel] != "":
		default:
			d.workers = append(d.workers, m)
			if ref := metav1.GetControllerOf(m); ref == nil || ref.Kind == "Cluster" {
				d.standalone = append(d.standalone, m)
			}
		}
	}
	return d, nil
}

// replicaSums adds up replica counters; a counter nobody reports stays nil.
type replicaSums struct{ desired, current, ready, available, upToDate *int32 }

func add(dst **int32, v *int32) {
	if v != nil {
		*dst = ptr.To(ptr.Deref(*dst, 0) + *v)
	}
}

// addMachine counts one Machine as a replica that was asked for.
func (s *replicaSums) addMachine(m *clusterv1.Machine) {
	one, zero := ptr.To[int32](1), ptr.To[int32](0)
	pick := func(t string) *int32 {
		if conditions.IsTrue(m, t) {
			return one
		}
		return zero
	}
	add(&s.desired, one)
	add(&s.current, one)
	add(&s.ready, pick(clusterv1.MachineReadyCondition))
	add(&s.available, pick(clusterv1.MachineAvailableCondition))
	add(&s.upToDate, pick(clusterv1.MachineUpToDateCondition))
}

// setWorkers fills status.workers from MachinePools, MachineDeployments, MachineSets of
// their own and Machines of their own.
func setWorkers(cl *clusterv1.Cluster, d *descendants) {
	var s replicaSums
	counters := func(spec, rep, ready, avail, upd *int32) {
		add(&s.desired, spec)
		add(&s.current, rep)
		add(&s.ready, ready)
		add(&s.available, avail)
		add(&s.upToDate, upd)
	}
	for _, p := range d.pools {
		counters(p.Spec.Replicas, p.Status.Replicas, p.Status.ReadyReplicas, p.Status.AvailableReplicas, p.Status.UpToDateReplicas)
	}
	for _, md := range d.deployments {
		counters(md.Spec.Replicas, md.Status.Replicas, md.Status.ReadyReplicas, md.Status.AvailableReplicas, md.Status.UpToDateReplicas)
	}
	for _, ms := range d.sets {
		counters(ms.Spec.Replicas, ms.Status.Replicas, ms.Status.ReadyReplicas, ms.Status.AvailableReplicas, ms.Status.UpToDateReplicas)
	}
	for _, m := range d.standalone {
		s.addMachine(m)
	}
	if cl.Status.Workers == nil {
		cl.Status.Workers = &clusterv1.WorkersStatus{}
	}
	w := cl.Status.Workers
	w.DesiredReplicas, w.Replicas, w.ReadyReplicas, w.AvailableReplicas, w.UpToDateReplicas = s.desired, s.current, s.ready, s.available, s.upToDate
}

// setControlPlaneFromMachines fills status.controlPlane from control-plane Machines, for a
// Cluster without spec.controlPlaneRef.
func setControlPlaneFromMachines(cl *clusterv1.Cluster, d *descendants) {
	var s replicaSums
	for _, m := range d.controlPlane {
		s.addMachine(m)
	}
	if cl.Status.ControlPlane == nil {
		cl.Status.ControlPlane = &clusterv1.ClusterControlPlaneStatus{}
	}
	c := cl.Status.ControlPlane
	c.DesiredReplicas, c.Replicas, c.ReadyReplicas, c.AvailableReplicas, c.UpToDateReplicas = s.desired, s.current, s.ready, s.available, s.upToDate
}

// setMachinesConditions sets ControlPlaneMachinesReady/UpToDate and
// WorkerMachinesReady/UpToDate from the Machines' Ready and UpToDate.
func setMachinesConditions(cl *clusterv1.Cluster, d *descendants) {
	set := func(machines []*clusterv1.Machine, t, cond, none string, rs conds.Reasons) {
		if t == clusterv1.MachineUpToDateCondition {
			machines = slices.DeleteFunc(slices.Clone(machines), func(m *clusterv1.Machine) bool {
				return !conditions.Has(m, t) && time.Since(m.CreationTimestamp.Time) < newMachineGrace
			})
		}
		if len(machines) == 0 {
			setCondition(cl, cond, metav1.ConditionTrue, none, "")
			return
		}
		conditions.Set(cl, conds.Aggregate(machines, t, cond, conds.Positive, rs))
	}
	set(d.controlPlane, clusterv1.MachineReadyCondition, clusterv1.ClusterControlPlaneMachinesReadyCondition,
		clusterv1.ClusterControlPlaneMachinesReadyNoReplicasReason, conds.Reasons{Issue: clusterv1.ClusterControlPlaneMachinesNotReadyReason,
			Unknown: clusterv1.ClusterControlPlaneMachinesReadyUnknownReason, OK: clusterv1.ClusterControlPlaneMachinesReadyReason})
	set(d.workers, clusterv1.MachineReadyCondition, clusterv1.ClusterWorkerMachinesReadyCondition,
		clusterv1.ClusterWorkerMachinesReadyNoReplicasReason, conds.Reasons{Issue: clusterv1.ClusterWorkerMachinesNotReadyReason,
			Unknown: clusterv1.ClusterWorkerMachinesReadyUnknownReason, OK: clusterv1.ClusterWorkerMachinesReadyReason})
	set(d.controlPlane, clusterv1.MachineUpToDateCondition, clusterv1.ClusterControlPlaneMachinesUpToDateCondition,
		clusterv1.ClusterControlPlaneMachinesUpToDateNoReplicasReason, conds.Reasons{Issue: clusterv1.ClusterControlPlaneMachinesNotUpToDateReason,
			Unknown: clusterv1.ClusterControlPlaneMachinesUpToDateUnknownReason, OK: clusterv1.ClusterControlPlaneMachinesUpToDateReason})
	set(d.workers, clusterv1.MachineUpToDateCondition, clusterv1.ClusterWorkerMachinesUpToDateCondition,
		clusterv1.ClusterWorkerMachinesUpToDateNoReplicasReason, conds.Reasons{Issue: clusterv1.ClusterWorkerMachinesNotUpToDateReason,
			Unknown: clusterv1.ClusterWorkerMachinesUpToDateUnknownReason, OK: clusterv1.ClusterWorkerMachinesUpToDateReason})
}

// workerSources lists the MachineDeployments and, with sets, the MachineSets of their own
// (MachinePools are left out, as upstream does until they report these conditions).
func workerSources(d *descendants, sets bool) []conds.Object {
	var out []conds.Object
	for i := range d.deployments {
		out = append(out, &d.deployments[i])
	}
	if sets {
		for i := range d.sets {
			out = append(out, &d.sets[i])
		}
	}
	return out
}

// setWorkerConditions sets WorkersAvailable, RollingOut, ScalingUp and ScalingDown from the
// MachineDeployments (and, for scaling, the MachineSets of their own and a control plane that
// reports the condition; cp is nil without one).
func setWorkerConditions(cl *clusterv1.Cluster, d *descendants, cp conds.Object) {
	if len(d.deployments) == 0 {
		setCondition(cl, clusterv1.ClusterWorkersAvailableCondition, metav1.ConditionTrue, clusterv1.ClusterWorkersAvailableNoWorkersReason, "")
	} else {
		conditions.Set(cl, conds.Aggregate(workerSources(d, false), clusterv1.AvailableCondition, clusterv1.ClusterWorkersAvailableCondition,
			conds.Positive, conds.Reasons{Issue: clusterv1.ClusterWorkersNotAvailableReason,
				Unknown: clusterv1.ClusterWorkersAvailableUnknownReason, OK: clusterv1.ClusterWorkersAvailableReason}))
	}
	for _, n := range []struct {
		cond, t string
		sets    bool
		rs      conds.Reasons
	}{
		{clusterv1.ClusterRollingOutCondition, clusterv1.RollingOutCondition, false, conds.Reasons{Issue: clusterv1.ClusterRollingOutReason,
			Unknown: clusterv1.ClusterRollingOutUnknownReason, OK: clusterv1.ClusterNotRollingOutReason}},
		{clusterv1.ClusterScalingUpCondition, clusterv1.ScalingUpCondition, true, conds.Reasons{Issue: clusterv1.ClusterScalingUpReason,
			Unknown: clusterv1.ClusterScalingUpUnknownReason, OK: clusterv1.ClusterNotScalingUpReason}},
		{clusterv1.ClusterScalingDownCondition, clusterv1.ScalingDownCondition, true, conds.Reasons{Issue: clusterv1.ClusterScalingDownReason,
			Unknown: clusterv1.ClusterScalingDownUnknownReason, OK: clusterv1.ClusterNotScalingDownReason}},
	} {
		srcs := workerSources(d, n.sets)
		if cp != nil && conditions.Has(cp, n.t) {
			srcs = append([]conds.Object{cp}, srcs...)
		}
		if len(srcs) == 0 {
			setCondition(cl, n.cond, metav1.ConditionFalse, n.rs.OK, "")
			continue
		}
		conditions.Set(cl, conds.Aggregate(srcs, n.t, n.cond, conds.Negative, n.rs))
	}
}

// setRemediating: True while Machines of the Cluster (MachinePool Machines aside) wait for
// their owner to remediate them; otherwise False, naming unhealthy Machines nobody remediates.
func setRemediating(cl *clusterv1.Cluster, d *descendants) {
	var toRemediate []*clusterv1.Machine
	var unhealthy []string
	for _, m := range slices.Concat(d.controlPlane, d.workers) {
		if !conditions.IsFalse(m, clusterv1.MachineHealthCheckSucceededCondition) {
			continue
		}
		if conditions.IsFalse(m, clusterv1.MachineOwnerRemediatedCondition) {
			toRemediate = append(toRemediate, m)
		} else {
			unhealthy = append(unhealthy, m.Name)
		}
	}
	if len(toRemediate) == 0 {
		msg := ""
		if len(unhealthy) > 0 {
			slices.Sort(unhealthy)
			msg = fmt.Sprintf("Machines %s not healthy (not to be remediated)", shortList(unhealthy))
		}
		setCondition(cl, clusterv1.ClusterRemediatingCondition, metav1.ConditionFalse, clusterv1.ClusterNotRemediatingReason, msg)
		return
	}
	conditions.Set(cl, conds.Remediating(toRemediate, clusterv1.ClusterRemediatingReason))
}

// shortList joins the first three names, "a, b, c, ... (2 more)".
func shortList(names []string) string {
	if len(names) <= 3 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s, ... (%d more)", strings.Join(names[:3], ", "), len(names)-3)
}

// setAvailable summarises the Cluster: Deleting (negative), RemoteConnectionProbe,
// InfrastructureReady, ControlPlaneAvailable (when the Cluster has a control plane object),
// WorkersAvailable and spec.availabilityGates.
func setAvailable(cl *clusterv1.Cluster) {
	types := conditions.ForConditionTypes{clusterv1.ClusterDeletingCondition, clusterv1.ClusterRemoteConnectionProbeCondition,
		clusterv1.ClusterInfrastructureReadyCondition}
	if cl.Spec.ControlPlaneRef.IsDefined() {
		types = append(types, clusterv1.ClusterControlPlaneAvailableCondition)
	}
	types = append(types, clusterv1.ClusterWorkersAvailableCondition)
	negative := []string{clusterv1.ClusterDeletingCondition}
	for _, g := range cl.Spec.AvailabilityGates {
		types = append(types, g.ConditionType)
		if g.Polarity == clusterv1.NegativePolarityCondition {
			negative = append(negative, g.ConditionType)
		}
	}
	byStatus := conditions.GetDefaultMergePriorityFunc(negative...)
	priority := func(c metav1.Condition) conditions.MergePriority {
		if deletedInfra(cl, &c) {
			return conditions.InfoMergePriority
		}
		return byStatus(c)
	}
	c, err := conditions.NewSummaryCondition(cl, clusterv1.ClusterAvailableCondition, types,
		conditions.CustomMergeStrategy{MergeStrategy: conditions.DefaultMergeStrategy(conditions.GetPriorityFunc(priority),
			conditions.ComputeReasonFunc(conditions.GetDefaultComputeMergeReasonFunc(clusterv1.ClusterNotAvailableReason,
				clusterv1.ClusterAvailableUnknownReason, clusterv1.ClusterAvailableReason)))})
	if err != nil {
		// Only a gate on Available itself gets here: the library refuses to summarise a
		// condition into itself.
		setCondition(cl, clusterv1.ClusterAvailableCondition, metav1.ConditionUnknown, clusterv1.ClusterAvailableInternalErrorReason, err.Error())
		return
	}
	conditions.Set(cl, *c)
}

// deletedInfra: while the Cluster is deleted, an InfraCluster going away is expected.
func deletedInfra(cl *clusterv1.Cluster, c *metav1.Condition) bool {
	return !cl.DeletionTimestamp.IsZero() && c.Type == clusterv1.ClusterInfrastructureReadyCondition &&
		(c.Reason == clusterv1.ClusterInfrastructureDeletedReason || c.Reason == clusterv1.ClusterInfrastructureDoesNotExistReason)
}
