package machine

import (
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/mapicond"
)

func phase(m *machinev1beta1.Machine) string { return ptr.Deref(m.Status.Phase, "") }

// setPhase moves the Machine to a phase, stamping lastUpdated and emitting an event on change.
func (r *Reconciler) setPhase(m *machinev1beta1.Machine, p string) {
	if !r.setPhaseQuietly(m, p) {
		return
	}
	typ := corev1.EventTypeNormal
	if p == machinev1beta1.PhaseFailed {
		typ = corev1.EventTypeWarning
	}
	events.Eventf(r.Recorder, m, typ, "Phase"+p, "Machine %s is %s", m.Name, p)
}

// setPhaseQuietly moves the Machine to a phase without an event, reporting a change.
func (r *Reconciler) setPhaseQuietly(m *machinev1beta1.Machine, p string) bool {
	if phase(m) == p {
		return false
	}
	m.Status.Phase = ptr.To(p)
	now := metav1.Now()
	m.Status.LastUpdated = &now
	return true
}

// fail moves the Machine to the terminal Failed phase with a reason and a message. The
// instance's state is Unknown from then on (the Machine's State column), as the Machine API's
// own controller shows a Failed Machine: nothing looks at the instance again until the
// Machine is deleted, when the actuator reports the state it finds.
func (r *Reconciler) fail(m *machinev1beta1.Machine, reason machinev1beta1.MachineStatusError, msg string) {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[InstanceStateAnnotation] = UnknownInstanceState
	m.Status.ErrorReason = ptr.To(reason)
	m.Status.ErrorMessage = ptr.To(msg)
	r.setPhase(m, machinev1beta1.PhaseFailed)
	events.Eventf(r.Recorder, m, corev1.EventTypeWarning, string(reason), "%s", msg)
}

func clearError(m *machinev1beta1.Machine) {
	m.Status.ErrorReason, m.Status.ErrorMessage = nil, nil
}

func setCondition(m *machinev1beta1.Machine, t machinev1beta1.ConditionType, s corev1.ConditionStatus, reason, msg string) {
	mapicond.Set(&m.Status.Conditions, machinev1beta1.Condition{Type: t, Status: s, Reason: reason, Message: msg})
}

func setInstanceExists(m *machinev1beta1.Machine, s corev1.ConditionStatus, reason, msg string) {
	setCondition(m, machinev1beta1.InstanceExistsCondition, s, reason, msg)
}

func setCreation(m *machinev1beta1.Machine, s corev1.ConditionStatus, reason, msg string) {
	setCondition(m, machinev1beta1.MachineCreation, s, reason, msg)
}
