package machine

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/machina-dev/machina/internal/events"
)

// setCondition sets a condition with the library, which stamps the observed generation,
// keeps the last transition time while the status holds and orders the list as upstream.
func setCondition(m *clusterv1.Machine, t string, s metav1.ConditionStatus, reason, msg string) {
	conditions.Set(m, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg})
}

func isTrue(m *clusterv1.Machine, t string) bool {
	return conditions.IsTrue(m, t)
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
	if m.DeletionTimestamp.IsZero() {
		conditions.Set(m, readySummary(m))
	} else {
		setCondition(m, clusterv1.MachineReadyCondition, metav1.ConditionFalse, clusterv1.MachineNotReadyReason, "the Machine is being deleted")
	}
	return setAvailable(m, time.Now())
}

// readySummary merges BootstrapConfigReady, InfrastructureReady, NodeHealthy and the
// readiness gates with the library's summary, whose message lists those not at their normal
// status. Unknown and missing ones count as not ready too: machina's Machine Ready is True or
// False, never Unknown.
func readySummary(m *clusterv1.Machine) metav1.Condition {
	types := conditions.ForConditionTypes{clusterv1.MachineBootstrapConfigReadyCondition, clusterv1.MachineInfrastructureReadyCondition,
		clusterv1.MachineNodeHealthyCondition}
	negative := map[string]bool{}
	for _, g := range m.Spec.ReadinessGates {
		types = append(types, g.ConditionType)
		negative[g.ConditionType] = g.Polarity == clusterv1.NegativePolarityCondition
	}
	priority := func(c metav1.Condition) conditions.MergePriority {
		if (c.Status == metav1.ConditionTrue && !negative[c.Type]) || (c.Status == metav1.ConditionFalse && negative[c.Type]) {
			return conditions.InfoMergePriority
		}
		return conditions.IssueMergePriority
	}
	c, err := conditions.NewSummaryCondition(m, clusterv1.MachineReadyCondition, types,
		conditions.CustomMergeStrategy{MergeStrategy: conditions.DefaultMergeStrategy(conditions.GetPriorityFunc(priority),
			conditions.ComputeReasonFunc(conditions.GetDefaultComputeMergeReasonFunc(clusterv1.MachineNotReadyReason,
				clusterv1.MachineNotReadyReason, clusterv1.MachineReadyReason)))})
	if err != nil {
		// Only a readiness gate on Ready itself gets here: the library refuses to summarise
		// a condition into itself.
		return metav1.Condition{Type: clusterv1.MachineReadyCondition, Status: metav1.ConditionUnknown,
			Reason: clusterv1.MachineReadyInternalErrorReason, Message: err.Error()}
	}
	return *c
}

// setAvailable sets Available: True once Ready has been True for spec.minReadySeconds (as
// of now), else False. It returns how long until a Ready Machine becomes Available.
func setAvailable(m *clusterv1.Machine, now time.Time) time.Duration {
	ready := conditions.Get(m, clusterv1.MachineReadyCondition)
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
