package machine

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
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
		r.event(m, corev1.EventTypeWarning, "Phase"+string(p), "Machine %s is %s", m.Name, p)
	case clusterv1.MachinePhaseDeleting:
		r.event(m, corev1.EventTypeNormal, "Phase"+string(p), "Machine %s is %s", m.Name, p)
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
// fine and it is not being deleted; Available follows Ready (no minReadySeconds handling).
func setReady(m *clusterv1.Machine) {
	var notReady []string
	for _, t := range []string{clusterv1.MachineBootstrapConfigReadyCondition, clusterv1.MachineInfrastructureReadyCondition,
		clusterv1.MachineNodeHealthyCondition} {
		if !isTrue(m, t) {
			notReady = append(notReady, t)
		}
	}
	switch {
	case !m.DeletionTimestamp.IsZero():
		setCondition(m, clusterv1.MachineReadyCondition, metav1.ConditionFalse, clusterv1.MachineNotReadyReason, "the Machine is being deleted")
	case len(notReady) == 0:
		setCondition(m, clusterv1.MachineReadyCondition, metav1.ConditionTrue, clusterv1.MachineReadyReason, "")
	default:
		msg := "not true: "
		for i, t := range notReady {
			if i > 0 {
				msg += ", "
			}
			msg += t
		}
		setCondition(m, clusterv1.MachineReadyCondition, metav1.ConditionFalse, clusterv1.MachineNotReadyReason, msg)
	}
	if isTrue(m, clusterv1.MachineReadyCondition) {
		setCondition(m, clusterv1.MachineAvailableCondition, metav1.ConditionTrue, clusterv1.MachineAvailableReason, "")
	} else {
		setCondition(m, clusterv1.MachineAvailableCondition, metav1.ConditionFalse, clusterv1.NotAvailableReason, "the Machine is not Ready")
	}
}

// hasBootstrapData reports whether spec.bootstrap.dataSecretName names a Secret (an empty
// name, which the API accepts, does not).
func hasBootstrapData(m *clusterv1.Machine) bool {
	return m.Spec.Bootstrap.DataSecretName != nil && *m.Spec.Bootstrap.DataSecretName != ""
}
