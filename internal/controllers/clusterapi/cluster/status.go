package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
		if meta.IsStatusConditionTrue(m.Status.Conditions, t) {
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
	type reasons struct{ cond, none, issue, unknown, ok string }
	set := func(machines []*clusterv1.Machine, t string, rs reasons) {
		if t == clusterv1.MachineUpToDateCondition {
			machines = slices.DeleteFunc(slices.Clone(machines), func(m *clusterv1.Machine) bool {
				return meta.FindStatusCondition(m.Status.Conditions, t) == nil && time.Since(m.CreationTimestamp.Time) < newMachineGrace
			})
		}
		if len(machines) == 0 {
			setCondition(cl, rs.cond, metav1.ConditionTrue, rs.none, "")
			return
		}
		o := aggregate(machineSources(machines), t, false)
		setCondition(cl, rs.cond, o.status(false), o.reason(rs.issue, rs.unknown, rs.ok), o.message)
	}
	set(d.controlPlane, clusterv1.MachineReadyCondition, reasons{clusterv1.ClusterControlPlaneMachinesReadyCondition,
		clusterv1.ClusterControlPlaneMachinesReadyNoReplicasReason, clusterv1.ClusterControlPlaneMachinesNotReadyReason,
		clusterv1.ClusterControlPlaneMachinesReadyUnknownReason, clusterv1.ClusterControlPlaneMachinesReadyReason})
	set(d.workers, clusterv1.MachineReadyCondition, reasons{clusterv1.ClusterWorkerMachinesReadyCondition,
		clusterv1.ClusterWorkerMachinesReadyNoReplicasReason, clusterv1.ClusterWorkerMachinesNotReadyReason,
		clusterv1.ClusterWorkerMachinesReadyUnknownReason, clusterv1.ClusterWorkerMachinesReadyReason})
	set(d.controlPlane, clusterv1.MachineUpToDateCondition, reasons{clusterv1.ClusterControlPlaneMachinesUpToDateCondition,
		clusterv1.ClusterControlPlaneMachinesUpToDateNoReplicasReason, clusterv1.ClusterControlPlaneMachinesNotUpToDateReason,
		clusterv1.ClusterControlPlaneMachinesUpToDateUnknownReason, clusterv1.ClusterControlPlaneMachinesUpToDateReason})
	set(d.workers, clusterv1.MachineUpToDateCondition, reasons{clusterv1.ClusterWorkerMachinesUpToDateCondition,
		clusterv1.ClusterWorkerMachinesUpToDateNoReplicasReason, clusterv1.ClusterWorkerMachinesNotUpToDateReason,
		clusterv1.ClusterWorkerMachinesUpToDateUnknownReason, clusterv1.ClusterWorkerMachinesUpToDateReason})
}

func machineSources(machines []*clusterv1.Machine) []source {
	out := make([]source, 0, len(machines))
	for _, m := range machines {
		out = append(out, source{kind: "Machine", name: m.Name, conditions: m.Status.Conditions})
	}
	return out
}

// workerSources lists the MachineDeployments and, with sets, the MachineSets of their own
// (MachinePools are left out, as upstream does until they report these conditions).
func workerSources(d *descendants, sets bool) []source {
	var out []source
	for _, md := range d.deployments {
		out = append(out, source{kind: "MachineDeployment", name: md.Name, conditions: md.Status.Conditions})
	}
	if sets {
		for _, ms := range d.sets {
			out = append(out, source{kind: "MachineSet", name: ms.Name, conditions: ms.Status.Conditions})
		}
	}
	return out
}

// setWorkerConditions sets WorkersAvailable, RollingOut, ScalingUp and ScalingDown from the
// MachineDeployments (and, for scaling, the MachineSets of their own and a control plane that
// reports the condition).
func setWorkerConditions(cl *clusterv1.Cluster, d *descendants, cp *source) {
	if len(d.deployments) == 0 {
		setCondition(cl, clusterv1.ClusterWorkersAvailableCondition, metav1.ConditionTrue, clusterv1.ClusterWorkersAvailableNoWorkersReason, "")
	} else {
		o := aggregate(workerSources(d, false), clusterv1.AvailableCondition, false)
		setCondition(cl, clusterv1.ClusterWorkersAvailableCondition, o.status(false), o.reason(clusterv1.ClusterWorkersNotAvailableReason,
			clusterv1.ClusterWorkersAvailableUnknownReason, clusterv1.ClusterWorkersAvailableReason), o.message)
	}
	withCP := func(t string, sets bool) []source {
		srcs := workerSources(d, sets)
		if cp != nil && meta.FindStatusCondition(cp.conditions, t) != nil {
			srcs = append([]source{*cp}, srcs...)
		}
		return srcs
	}
	for _, n := range []struct {
		cond, t             string
		sets                bool
		yes, unknown, never string
	}{
		{clusterv1.ClusterRollingOutCondition, clusterv1.RollingOutCondition, false,
			clusterv1.ClusterRollingOutReason, clusterv1.ClusterRollingOutUnknownReason, clusterv1.ClusterNotRollingOutReason},
		{clusterv1.ClusterScalingUpCondition, clusterv1.ScalingUpCondition, true,
			clusterv1.ClusterScalingUpReason, clusterv1.ClusterScalingUpUnknownReason, clusterv1.ClusterNotScalingUpReason},
		{clusterv1.ClusterScalingDownCondition, clusterv1.ScalingDownCondition, true,
			clusterv1.ClusterScalingDownReason, clusterv1.ClusterScalingDownUnknownReason, clusterv1.ClusterNotScalingDownReason},
	} {
		srcs := withCP(n.t, n.sets)
		if len(srcs) == 0 {
			setCondition(cl, n.cond, metav1.ConditionFalse, n.never, "")
			continue
		}
		o := aggregate(srcs, n.t, true)
		setCondition(cl, n.cond, o.status(true), o.reason(n.yes, n.unknown, n.never), o.message)
	}
}

// setRemediating: True while Machines of the Cluster (MachinePool Machines aside) wait for
// their owner to remediate them; otherwise False, naming unhealthy Machines nobody remediates.
func setRemediating(cl *clusterv1.Cluster, d *descendants) {
	var toRemediate []source
	var unhealthy []string
	for _, m := range slices.Concat(d.controlPlane, d.workers) {
		if !meta.IsStatusConditionFalse(m.Status.Conditions, clusterv1.MachineHealthCheckSucceededCondition) {
			continue
		}
		if meta.IsStatusConditionFalse(m.Status.Conditions, clusterv1.MachineOwnerRemediatedCondition) {
			toRemediate = append(toRemediate, source{kind: "Machine", name: m.Name, conditions: m.Status.Conditions})
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
	o := aggregate(toRemediate, clusterv1.MachineOwnerRemediatedCondition, false)
	setCondition(cl, clusterv1.ClusterRemediatingCondition, metav1.ConditionTrue, clusterv1.ClusterRemediatingReason, o.message)
}

// setAvailable summarises the Cluster: Deleting (negative), RemoteConnectionProbe,
// InfrastructureReady, ControlPlaneAvailable (when the Cluster has a control plane object),
// WorkersAvailable and spec.availabilityGates.
func setAvailable(cl *clusterv1.Cluster) {
	types := []string{clusterv1.ClusterRemoteConnectionProbeCondition, clusterv1.ClusterInfrastructureReadyCondition}
	if cl.Spec.ControlPlaneRef.IsDefined() {
		types = append(types, clusterv1.ClusterControlPlaneAvailableCondition)
	}
	types = append(types, clusterv1.ClusterWorkersAvailableCondition)
	negative := map[string]bool{clusterv1.ClusterDeletingCondition: true}
	for _, g := range cl.Spec.AvailabilityGates {
		types = append(types, g.ConditionType)
		negative[g.ConditionType] = g.Polarity == clusterv1.NegativePolarityCondition
	}
	var issues, unknowns []string
	for _, t := range append([]string{clusterv1.ClusterDeletingCondition}, types...) {
		c := meta.FindStatusCondition(cl.Status.Conditions, t)
		switch {
		case c == nil:
			unknowns = append(unknowns, "* "+t+": Condition not yet reported")
		case c.Status == metav1.ConditionUnknown:
			unknowns = append(unknowns, line(c))
		case (c.Status == metav1.ConditionTrue) == negative[t] && !deletedInfra(cl, c):
			issues = append(issues, line(c))
		}
	}
	o := outcome{issue: len(issues) > 0, unknown: len(unknowns) > 0}
	msg := strings.Join(slices.Concat(issues, unknowns), "\n")
	setCondition(cl, clusterv1.ClusterAvailableCondition, o.status(false),
		o.reason(clusterv1.ClusterNotAvailableReason, clusterv1.ClusterAvailableUnknownReason, clusterv1.ClusterAvailableReason), msg)
}

func line(c *metav1.Condition) string {
	if c.Message == "" {
		return "* " + c.Type + ": " + c.Reason
	}
	return "* " + c.Type + ": " + c.Message
}

// deletedInfra: while the Cluster is deleted, an InfraCluster going away is expected.
func deletedInfra(cl *clusterv1.Cluster, c *metav1.Condition) bool {
	return !cl.DeletionTimestamp.IsZero() && c.Type == clusterv1.ClusterInfrastructureReadyCondition &&
		(c.Reason == clusterv1.ClusterInfrastructureDeletedReason || c.Reason == clusterv1.ClusterInfrastructureDoesNotExistReason)
}
