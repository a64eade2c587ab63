package machinedeployment

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/conds"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/setctl"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/versions"
)

// setCondition sets a condition with the library, which stamps the observed generation,
// keeps the last transition time while the status holds and orders the list as upstream.
func setCondition(md *clusterv1.MachineDeployment, t string, s metav1.ConditionStatus, reason, msg string) {
	conditions.Set(md, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg})
}

// tally is what the status counts, over the Machines of every MachineSet of the
// MachineDeployment.
type tally struct {
	replicas, active, ready, available, upToDate int32
	stale, deleting                              []string
	// machines are all of them, those being deleted included.
	machines, remediating []*clusterv1.Machine
}

func count(ds *deploymentSets) tally {
	var t tally
	for _, s := range ds.sets {
		t.machines = append(t.machines, s.machines...)
		for _, m := range s.machines {
			t.replicas++
			if m.DeletionTimestamp.IsZero() {
				t.active++
			} else {
				t.deleting = append(t.deleting, m.Name)
			}
			if conditions.IsTrue(m, clusterv1.MachineReadyCondition) {
				t.ready++
			}
			if isAvailable(m) {
				t.available++
			}
			// Machines of the new MachineSet have the MachineDeployment's template (its
			// in-place fields follow it); every other Machine is to be replaced.
			if s == ds.current {
				t.upToDate++
			} else {
				t.stale = append(t.stale, m.Name)
			}
			if conditions.IsFalse(m, clusterv1.MachineOwnerRemediatedCondition) {
				t.remediating = append(t.remediating, m)
			}
		}
	}
	return t
}

// updateStatus computes the counts, the versions, the selector, the phase and the v1beta2
// conditions. Versions count the Machines of all the MachineSets, which is what upstream's
// sum of the MachineSets' status.versions amounts to once those are current.
// rolloutErr, when set, is why the last rollout step failed.
func updateStatus(md *clusterv1.MachineDeployment, ds *deploymentSets, st strategy, rolloutErr error) {
	if sel, err := metav1.LabelSelectorAsSelector(&md.Spec.Selector); err == nil {
		md.Status.Selector = sel.String()
	}
	t := count(ds)
	md.Status.Replicas = ptr.To(t.replicas)
	md.Status.ReadyReplicas = ptr.To(t.ready)
	md.Status.AvailableReplicas = ptr.To(t.available)
	md.Status.UpToDateReplicas = ptr.To(t.upToDate)
	md.Status.Versions = versions.FromMachines(t.machines)
	setAvailableCondition(md, st, t)
	setScalingConditions(md, t, rolloutErr)
	setRollingOut(md, t)
	setMachineConditions(md, t)
	switch want := ptr.Deref(md.Spec.Replicas, t.replicas); {
	case md.Spec.Replicas == nil:
		md.Status.SetTypedPhase(clusterv1.MachineDeploymentPhaseUnknown)
	case t.active < want:
		md.Status.SetTypedPhase(clusterv1.MachineDeploymentPhaseScalingUp)
	case t.replicas > want:
		md.Status.SetTypedPhase(clusterv1.MachineDeploymentPhaseScalingDown)
	default:
		md.Status.SetTypedPhase(clusterv1.MachineDeploymentPhaseRunning)
	}
}

// setAvailableCondition: at least spec.replicas - maxUnavailable Machines are Available.
func setAvailableCondition(md *clusterv1.MachineDeployment, st strategy, t tally) {
	if md.Spec.Replicas == nil {
		setCondition(md, clusterv1.MachineDeploymentAvailableCondition, metav1.ConditionUnknown,
			clusterv1.MachineDeploymentAvailableWaitingForReplicasSetReason, "waiting for spec.replicas to be set")
		return
	}
	want := max(0, *md.Spec.Replicas-st.unavailable)
	if t.available >= want {
		setCondition(md, clusterv1.MachineDeploymentAvailableCondition, metav1.ConditionTrue, clusterv1.MachineDeploymentAvailableReason, "")
		return
	}
	setCondition(md, clusterv1.MachineDeploymentAvailableCondition, metav1.ConditionFalse, clusterv1.MachineDeploymentNotAvailableReason,
		fmt.Sprintf("%d available replicas, at least %d required (spec.replicas %d, maxUnavailable %d)", t.available, want,
			*md.Spec.Replicas, st.unavailable))
}

// setScalingConditions: ScalingUp while fewer Machines than spec.replicas are not being
// deleted, ScalingDown while more than spec.replicas exist (a rollout's surge included).
func setScalingConditions(md *clusterv1.MachineDeployment, t tally, rolloutErr error) {
	if md.Spec.Replicas == nil {
		for _, c := range []string{clusterv1.MachineDeploymentScalingUpCondition, clusterv1.MachineDeploymentScalingDownCondition} {
			setCondition(md, c, metav1.ConditionUnknown, clusterv1.MachineDeploymentScalingUpWaitingForReplicasSetReason,
				"waiting for spec.replicas to be set")
		}
		return
	}
	want := *md.Spec.Replicas
	if t.active < want {
		msg := fmt.Sprintf("scaling up from %d to %d replicas", t.active, want)
		if rolloutErr != nil {
			msg += ": " + rolloutErr.Error()
		}
		setCondition(md, clusterv1.MachineDeploymentScalingUpCondition, metav1.ConditionTrue, clusterv1.MachineDeploymentScalingUpReason, msg)
	} else {
		setCondition(md, clusterv1.MachineDeploymentScalingUpCondition, metav1.ConditionFalse, clusterv1.MachineDeploymentNotScalingUpReason, "")
	}
	if t.replicas > want {
		msg := fmt.Sprintf("scaling down from %d to %d replicas", t.replicas, want)
		if len(t.deleting) > 0 {
			msg += "; deleting " + setctl.Summarise(t.deleting)
		}
		setCondition(md, clusterv1.MachineDeploymentScalingDownCondition, metav1.ConditionTrue, clusterv1.MachineDeploymentScalingDownReason, msg)
	} else {
		setCondition(md, clusterv1.MachineDeploymentScalingDownCondition, metav1.ConditionFalse,
			clusterv1.MachineDeploymentNotScalingDownReason, "")
	}
}

// setRollingOut: True while any Machine is not up to date.
func setRollingOut(md *clusterv1.MachineDeployment, t tally) {
	if len(t.stale) == 0 {
		setCondition(md, clusterv1.MachineDeploymentRollingOutCondition, metav1.ConditionFalse, clusterv1.MachineDeploymentNotRollingOutReason, "")
		return
	}
	msg := fmt.Sprintf("rolling out changes to %d not up-to-date replicas: %s", len(t.stale), setctl.Summarise(t.stale))
	if ptr.Deref(md.Spec.Paused, false) {
		msg += " (on hold: spec.paused is set)"
	}
	setCondition(md, clusterv1.MachineDeploymentRollingOutCondition, metav1.ConditionTrue, clusterv1.MachineDeploymentRollingOutReason, msg)
}

// setMachineConditions sets MachinesReady, MachinesUpToDate and Remediating.
func setMachineConditions(md *clusterv1.MachineDeployment, t tally) {
	if t.replicas == 0 {
		setCondition(md, clusterv1.MachineDeploymentMachinesReadyCondition, metav1.ConditionTrue,
			clusterv1.MachineDeploymentMachinesReadyNoReplicasReason, "")
	} else {
		// Strict: a Machine whose Ready is Unknown or missing counts as not ready, as it
		// always has here (MachinesReady is True or False).
		conditions.Set(md, conds.Aggregate(t.machines, clusterv1.MachineReadyCondition, clusterv1.MachineDeploymentMachinesReadyCondition,
			conds.Strict, conds.Reasons{Issue: clusterv1.MachineDeploymentMachinesNotReadyReason,
				Unknown: clusterv1.MachineDeploymentMachinesReadyUnknownReason, OK: clusterv1.MachineDeploymentMachinesReadyReason}))
	}
	switch {
	case t.replicas == 0:
		setCondition(md, clusterv1.MachineDeploymentMachinesUpToDateCondition, metav1.ConditionTrue,
			clusterv1.MachineDeploymentMachinesUpToDateNoReplicasReason, "")
	case len(t.stale) > 0:
		setCondition(md, clusterv1.MachineDeploymentMachinesUpToDateCondition, metav1.ConditionFalse,
			clusterv1.MachineDeploymentMachinesNotUpToDateReason, "not up to date: "+setctl.Summarise(t.stale))
	default:
		setCondition(md, clusterv1.MachineDeploymentMachinesUpToDateCondition, metav1.ConditionTrue,
			clusterv1.MachineDeploymentMachinesUpToDateReason, "")
	}
	if len(t.remediating) > 0 {
		conditions.Set(md, conds.Remediating(t.remediating, clusterv1.MachineDeploymentRemediatingReason))
	} else {
		setCondition(md, clusterv1.MachineDeploymentRemediatingCondition, metav1.ConditionFalse,
			clusterv1.MachineDeploymentNotRemediatingReason, "")
	}
}

// statusChanged reports whether the status differs at all.
func statusChanged(before, after *clusterv1.MachineDeployment) bool {
	return !equality.Semantic.DeepEqual(before.Status, after.Status)
}

// minorStatusChange reports whether only counts and condition messages changed: no
// condition appeared, disappeared or changed status or reason, the observed generation,
// selector and phase are the same, and the counts have not settled.
func minorStatusChange(before, after *clusterv1.MachineDeployment) bool {
	b, a := before.Status, after.Status
	if b.ObservedGeneration != a.ObservedGeneration || b.Selector != a.Selector || b.Phase != a.Phase ||
		len(b.Conditions) != len(a.Conditions) {
		return false
	}
	for _, c := range a.Conditions {
		o := meta.FindStatusCondition(b.Conditions, c.Type)
		if o == nil || o.Status != c.Status || o.Reason != c.Reason {
			return false
		}
	}
	settled := after.Spec.Replicas != nil && ptr.Deref(a.Replicas, -1) == *after.Spec.Replicas &&
		ptr.Deref(a.AvailableReplicas, -1) == *after.Spec.Replicas && ptr.Deref(a.UpToDateReplicas, -1) == *after.Spec.Replicas
	return !settled
}
