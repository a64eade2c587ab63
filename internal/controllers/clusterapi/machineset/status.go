package machineset

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/setctl"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/versions"
)

// newMachineGrace is how long a new Machine without a Ready condition counts as not ready
// rather than unknown: its controller has not looked at it yet.
const newMachineGrace = 10 * time.Second

func setCondition(ms *clusterv1.MachineSet, t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&ms.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg,
		ObservedGeneration: ms.Generation})
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
	var notReady, unknown, stale, remediating, deleting []string
	var next time.Duration
	for _, m := range machines {
		replicas++
		if !m.DeletionTimestamp.IsZero() {
			deleting = append(deleting, m.Name)
		} else {
			active++
		}
		switch c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineReadyCondition); {
		case c != nil && c.Status == metav1.ConditionTrue:
			ready++
		case c != nil && c.Status == metav1.ConditionFalse:
			notReady = append(notReady, m.Name)
		case time.Since(m.CreationTimestamp.Time) < newMachineGrace:
			notReady = append(notReady, m.Name)
			if wait := newMachineGrace - time.Since(m.CreationTimestamp.Time); next == 0 || wait < next {
				next = wait
			}
		default:
			unknown = append(unknown, m.Name)
		}
		if meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineAvailableCondition) {
			available++
		}
		if upToDate(ms, m, hash) {
			current++
		} else {
			stale = append(stale, m.Name)
		}
		if c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineOwnerRemediatedCondition); c != nil &&
			c.Status == metav1.ConditionFalse {
			remediating = append(remediating, m.Name)
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
	switch {
	case replicas == 0:
		setCondition(ms, clusterv1.MachineSetMachinesReadyCondition, metav1.ConditionTrue, clusterv1.MachineSetMachinesReadyNoReplicasReason, "")
	case len(notReady) > 0:
		setCondition(ms, clusterv1.MachineSetMachinesReadyCondition, metav1.ConditionFalse, clusterv1.MachineSetMachinesNotReadyReason,
			"not ready: "+setctl.Summarise(notReady))
	case len(unknown) > 0:
		setCondition(ms, clusterv1.MachineSetMachinesReadyCondition, metav1.ConditionUnknown, clusterv1.MachineSetMachinesReadyUnknownReason,
			"readiness unknown: "+setctl.Summarise(unknown))
	default:
		setCondition(ms, clusterv1.MachineSetMachinesReadyCondition, metav1.ConditionTrue, clusterv1.MachineSetMachinesReadyReason, "")
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
		setCondition(ms, clusterv1.MachineSetRemediatingCondition, metav1.ConditionTrue, clusterv1.MachineSetRemediatingReason,
			"remediating "+setctl.Summarise(remediating))
	} else {
		setCondition(ms, clusterv1.MachineSetRemediatingCondition, metav1.ConditionFalse, clusterv1.MachineSetNotRemediatingReason, "")
	}
	if next > 0 {
		next += 100 * time.Millisecond
	}
	return next
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
