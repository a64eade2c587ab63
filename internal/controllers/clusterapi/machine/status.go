package machine

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/machina-dev/machina/internal/events"
)

func setCondition(m *clusterv1.Machine, t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg,
		ObservedGeneration: m.Generation})
}

func isTrue(m *clusterv1.Machine, t string) bool {
	return meta.IsStatusConditionTrue(m.Status.Conditions, t)
}

func metaOwnerRef(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid}
}

// setPhase moves the Machine to a phase, stamping lastUpdated. Failed and Deleting get an
// event; the happy path is told by InfrastructureProvisioned and SuccessfulSetNodeRef, so a
// new Machine does not cost an event write per phase.
func (r *Reconciler) setPhase(m *clusterv1.Machine, p clusterv1.MachinePhase) {
	if m.Status.Phase == string(p) {
		return
	}
	m.Status.Phase = string(p)
	m.Status.LastUpdated = metav1.Now()
	switch p {
	case clusterv1.MachinePhaseFailed:
		events.Eventf(r.Recorder, m, corev1.EventTypeWarning, "Phase"+string(p), "Machine %s is %s", m.Name, p)
	case clusterv1.MachinePhaseDeleting:
		events.Eventf(r.Recorder, m, corev1.EventTypeNormal, "Phase"+string(p), "Machine %s is %s", m.Name, p)
	}
}

// failed reports whether a terminal failure was surfaced on the Machine.
func failed(m *clusterv1.Machine) bool {
	d := m.Status.Deprecated
	return d != nil && d.V1Beta1 != nil && (d.V1Beta1.FailureReason != nil || d.V1Beta1.FailureMessage != nil)
}

// phaseFromStatus derives the phase of a Machine that is not being deleted.
func (r *Reconciler) updatePhase(m *clusterv1.Machine) {
	switch {
	case failed(m):
		r.setPhase(m, clusterv1.MachinePhaseFailed)
	case m.Status.NodeRef.IsDefined():
		r.setPhase(m, clusterv1.MachinePhaseRunning)
	case isProvisioned(m) && m.Spec.ProviderID != "":
		r.setPhase(m, clusterv1.MachinePhaseProvisioned)
	case hasBootstrapData(m):
		r.setPhase(m, clusterv1.MachinePhaseProvisioning)
	default:
		r.setPhase(m, clusterv1.MachinePhasePending)
	}
}

func isProvisioned(m *clusterv1.Machine) bool {
	p := m.Status.Initialization.InfrastructureProvisioned
	return p != nil && *p
}

// setReady summarises the Machine: Ready when bootstrap, infrastructure and Node are all
// fine, every spec.readinessGates condition has its normal status (True, or False for a
// Negative polarity) and it is not being deleted. Available follows Ready once Ready has
// been True for spec.minReadySeconds; setReady returns how long until then (0: nothing to
// wait for).
func setReady(m *clusterv1.Machine) time.Duration {
	var notReady []string
	for _, t := range []string{clusterv1.MachineBootstrapConfigReadyCondition, clusterv1.MachineInfrastructureReadyCondition,
		clusterv1.MachineNodeHealthyCondition} {
		if !isTrue(m, t) {
			notReady = append(notReady, t)
		}
	}
	switch gates := unmetReadinessGates(m); {
	case !m.DeletionTimestamp.IsZero():
		setCondition(m, clusterv1.MachineReadyCondition, metav1.ConditionFalse, clusterv1.MachineNotReadyReason, "the Machine is being deleted")
	case len(notReady) == 0 && len(gates) == 0:
		setCondition(m, clusterv1.MachineReadyCondition, metav1.ConditionTrue, clusterv1.MachineReadyReason, "")
	default:
		var parts []string
		if len(notReady) > 0 {
			parts = append(parts, "not true: "+strings.Join(notReady, ", "))
		}
		if len(gates) > 0 {
			parts = append(parts, "readiness gates not met: "+strings.Join(gates, ", "))
		}
		setCondition(m, clusterv1.MachineReadyCondition, metav1.ConditionFalse, clusterv1.MachineNotReadyReason, strings.Join(parts, "; "))
	}
	return setAvailable(m, time.Now())
}

// unmetReadinessGates lists the spec.readinessGates whose condition is missing or does not
// have its normal status, each with what it has.
func unmetReadinessGates(m *clusterv1.Machine) []string {
	var out []string
	for _, g := range m.Spec.ReadinessGates {
		want := metav1.ConditionTrue
		if g.Polarity == clusterv1.NegativePolarityCondition {
			want = metav1.ConditionFalse
		}
		switch c := meta.FindStatusCondition(m.Status.Conditions, g.ConditionType); {
		case c == nil:
			out = append(out, g.ConditionType+" (missing)")
		case c.Status != want:
			out = append(out, fmt.Sprintf("%s (%s, want %s)", g.ConditionType, c.Status, want))
		}
	}
	return out
}

// setAvailable sets Available: True once Ready has been True for spec.minReadySeconds (as
// of now), else False. It returns how long until a Ready Machine becomes Available.
func setAvailable(m *clusterv1.Machine, now time.Time) time.Duration {
	ready := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineReadyCondition)
	if ready == nil || ready.Status != metav1.ConditionTrue {
		setCondition(m, clusterv1.MachineAvailableCondition, metav1.ConditionFalse, clusterv1.NotAvailableReason, "the Machine is not Ready")
		return 0
	}
	minReady := time.Duration(ptr.Deref(m.Spec.MinReadySeconds, 0)) * time.Second
	if wait := ready.LastTransitionTime.Add(minReady).Sub(now); wait > 0 {
		setCondition(m, clusterv1.MachineAvailableCondition, metav1.ConditionFalse, clusterv1.MachineWaitingForMinReadySecondsReason,
			fmt.Sprintf("Ready for less than spec.minReadySeconds (%ds)", ptr.Deref(m.Spec.MinReadySeconds, 0)))
		return wait
	}
	setCondition(m, clusterv1.MachineAvailableCondition, metav1.ConditionTrue, clusterv1.MachineAvailableReason, "")
	return 0
}

// hasBootstrapData reports whether spec.bootstrap.dataSecretName names a Secret (an empty
// name, which the API accepts, does not).
func hasBootstrapData(m *clusterv1.Machine) bool {
	return m.Spec.Bootstrap.DataSecretName != nil && *m.Spec.Bootstrap.DataSecretName != ""
}
