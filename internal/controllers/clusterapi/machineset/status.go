package machineset

import (
	"fmt"
	"time"

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

// newMachineGrace is how long a new Machine without a Ready condition counts as not ready
// rather than unknown: its controller has not looked at it yet.
const newMachineGrace = 10 * time.Second

// setCondition sets a condition with the library, which stamps the observed generation,
// keeps the last transition time while the status holds and orders the list as upstream.
func setCondition(ms *clusterv1.MachineSet, t string, s metav1.ConditionStatus, reason, msg string) {
	conditions.Set(ms, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg})
}

// upToDate reports whether the Machine was created from the current template. Machines the
// MachineSet adopted carry no template hash and count as up to date.
func upToDate(ms *clusterv1.MachineSet, m *clusterv1.Machine, hash string) bool {
	h, ok := m.Annotations[TemplateHashAnnotation]
	return !ok || h == hash
}

// updateStatus computes replicas, readyReplicas, availableReplicas, upToDateReplicas, versions
// and the v1beta2 conditions from the Machines (those being deleted included). It returns when to look again (0: on events only).
// scaleErr, when set, is why the last scale step failed.
func (r *Reconciler) updateStatus(ms *clusterv1.MachineSet, machines []*clusterv1.Machine, scaleErr error) time.Duration {
	sel, _ := metav1.LabelSelectorAsSelector(&ms.Spec.Selector)
	ms.Status.Selector = sel.String()
	hash := templateHash(ms)
	var replicas, active, ready, available, current int32
	var stale, deleting []string
	var remediating, readiness []*clusterv1.Machine
	var next time.Duration
	for _, m := range machines {
		replicas++
		if !m.DeletionTimestamp.IsZero() {
			deleting = append(deleting, m.Name)
		} else {
			active++
		}
		if conditions.IsTrue(m, clusterv1.MachineReadyCondition) {
			ready++
		}
		r, wait := readinessOf(m)
		readiness = append(readiness, r)
		if wait > 0 && (next == 0 || wait < next) {
			next = wait
		}
		if conditions.IsTrue(m, clusterv1.MachineAvailableCondition) {
			available++
		}
		if upToDate(ms, m, hash) {
			current++
		} else {
			stale = append(stale, m.Name)
		}
		if conditions.IsFalse(m, clusterv1.MachineOwnerRemediatedCondition) {
			remediating = append(remediating, m)
		}
	}
	ms.Status.Replicas = ptr.To(replicas)
	ms.Status.ReadyReplicas = ptr.To(ready)
	ms.Status.AvailableReplicas = ptr.To(available)
	ms.Status.UpToDateReplicas = ptr.To(current)
	ms.Status.Versions = versions.FromMachines(machines)

	if ms.Spec.Replicas == nil {
		for _, t := range []string{clusterv1.MachineSetScalingUpCondition, clusterv1.MachineSetScalingDownCondition} {
			setCondition(ms, t, metav1.ConditionUnknown, clusterv1.MachineSetScalingUpWaitingForReplicasSetReason, "waiting for spec.replicas to be set")
		}
	} else {
		want := *ms.Spec.Replicas
		if active < want {
			msg := fmt.Sprintf("scaling up from %d to %d replicas", active, want)
			if scaleErr != nil {
				msg += ": " + scaleErr.Error()
			}
			setCondition(ms, clusterv1.MachineSetScalingUpCondition, metav1.ConditionTrue, clusterv1.MachineSetScalingUpReason, msg)
		} else {
			setCondition(ms, clusterv1.MachineSetScalingUpCondition, metav1.ConditionFalse, clusterv1.MachineSetNotScalingUpReason, "")
		}
		if replicas > want {
			msg := fmt.Sprintf("scaling down from %d to %d replicas", replicas, want)
			if len(deleting) > 0 {
				msg += "; deleting " + setctl.Summarise(deleting)
			}
			setCondition(ms, clusterv1.MachineSetScalingDownCondition, metav1.ConditionTrue, clusterv1.MachineSetScalingDownReason, msg)
		} else {
			setCondition(ms, clusterv1.MachineSetScalingDownCondition, metav1.ConditionFalse, clusterv1.MachineSetNotScalingDownReason, "")
		}
	}
	if replicas == 0 {
		setCondition(ms, clusterv1.MachineSetMachinesReadyCondition, metav1.ConditionTrue, clusterv1.MachineSetMachinesReadyNoReplicasReason, "")
	} else {
		conditions.Set(ms, conds.Aggregate(readiness, clusterv1.MachineReadyCondition, clusterv1.MachineSetMachinesReadyCondition,
			conds.Positive, conds.Reasons{Issue: clusterv1.MachineSetMachinesNotReadyReason,
				Unknown: clusterv1.MachineSetMachinesReadyUnknownReason, OK: clusterv1.MachineSetMachinesReadyReason}))
	}
	switch {
	case replicas == 0:
		setCondition(ms, clusterv1.MachineSetMachinesUpToDateCondition, metav1.ConditionTrue, clusterv1.MachineSetMachinesUpToDateNoReplicasReason, "")
	case len(stale) > 0:
		setCondition(ms, clusterv1.MachineSetMachinesUpToDateCondition, metav1.ConditionFalse, clusterv1.MachineSetMachinesNotUpToDateReason,
			"created from an older template: "+setctl.Summarise(stale))
	default:
		setCondition(ms, clusterv1.MachineSetMachinesUpToDateCondition, metav1.ConditionTrue, clusterv1.MachineSetMachinesUpToDateReason, "")
	}
	if len(remediating) > 0 {
		conditions.Set(ms, conds.Remediating(remediating, clusterv1.MachineSetRemediatingReason))
	} else {
		setCondition(ms, clusterv1.MachineSetRemediatingCondition, metav1.ConditionFalse, clusterv1.MachineSetNotRemediatingReason, "")
	}
	if next > 0 {
		next += 100 * time.Millisecond
	}
	return next
}

// readinessOf is the Machine as the MachinesReady aggregation sees it. A Machine younger
// than newMachineGrace whose Ready is neither True nor False counts as not ready rather than
// unknown (its controller has not looked at it yet): it is seen with Ready False, and wait
// says when the grace ends.
func readinessOf(m *clusterv1.Machine) (_ *clusterv1.Machine, wait time.Duration) {
	c := conditions.Get(m, clusterv1.MachineReadyCondition)
	wait = newMachineGrace - time.Since(m.CreationTimestamp.Time)
	if (c != nil && c.Status != metav1.ConditionUnknown) || wait <= 0 {
		return m, 0
	}
	seen := &clusterv1.Machine{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: m.Name, Labels: m.Labels}}
	notReady := metav1.Condition{Type: clusterv1.MachineReadyCondition, Status: metav1.ConditionFalse,
		Reason: clusterv1.MachineNotReadyReason, Message: "Condition Ready not yet reported"}
	if c != nil && c.Message != "" {
		notReady.Message = c.Message
	}
	seen.Status.Conditions = []metav1.Condition{notReady}
	return seen, wait
}

// statusChanged reports whether the status differs at all.
func statusChanged(before, after *clusterv1.MachineSet) bool {
	return !equality.Semantic.DeepEqual(before.Status, after.Status)
}

// minorStatusChange reports whether only counts and condition messages changed: no
// condition appeared, disappeared or changed status or reason, and the observed generation
// and selector are the same.
func minorStatusChange(before, after *clusterv1.MachineSet) bool {
	b, a := before.Status, after.Status
	if b.ObservedGeneration != a.ObservedGeneration || b.Selector != a.Selector || len(b.Conditions) != len(a.Conditions) {
		return false
	}
	for _, c := range a.Conditions {
		o := meta.FindStatusCondition(b.Conditions, c.Type)
		if o == nil || o.Status != c.Status || o.Reason != c.Reason {
			return false
		}
	}
	// The final counts (everything settled) go out at once.
	if a.Replicas != nil && a.ReadyReplicas != nil && *a.Replicas == *a.ReadyReplicas && after.Spec.Replicas != nil &&
		*a.Replicas == *after.Spec.Replicas {
		return false
	}
	return true
}
