package machine

import (
	"context"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// stubActuator finds no instance and refuses to create one as configured; what it found
// last it writes into the instance-state annotation, as real actuators do.
type stubActuator struct {
	state     string
	createErr error
}

func (a *stubActuator) Exists(_ context.Context, m *machinev1beta1.Machine) (bool, error) {
	if a.state != "" {
		m.Annotations[InstanceStateAnnotation] = a.state
	}
	return false, nil
}
func (a *stubActuator) Create(context.Context, *machinev1beta1.Machine) error { return a.createErr }
func (a *stubActuator) Update(context.Context, *machinev1beta1.Machine) error { return nil }
func (a *stubActuator) Delete(context.Context, *machinev1beta1.Machine) error { return nil }

// A Machine that fails shows the State Unknown, whether its configuration was refused or
// its instance vanished after provisioning (replacing the state it had before).
func TestFailedMachineStateIsUnknown(t *testing.T) {
	for name, tc := range map[string]struct {
		actuator *stubActuator
		mutate   func(*machinev1beta1.Machine)
		reason   machinev1beta1.MachineStatusError
	}{
		"invalid configuration": {actuator: &stubActuator{createErr: InvalidConfiguration("spec.providerSpec.value.image: no such image")},
			reason: machinev1beta1.InvalidConfigurationMachineError},
		"instance vanished": {actuator: &stubActuator{state: "terminated"}, reason: machinev1beta1.CreateMachineError,
			mutate: func(m *machinev1beta1.Machine) {
				m.Spec.ProviderID = ptr.To("sim:///sim-east-1a/i-1")
				m.Status.Phase = ptr.To(machinev1beta1.PhaseRunning)
			}},
	} {
		m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns",
			Annotations: map[string]string{InstanceStateAnnotation: "running"}}}
		if tc.mutate != nil {
			tc.mutate(m)
		}
		r := &Reconciler{Actuator: tc.actuator}
		if _, err := r.reconcileNormal(context.Background(), m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if phase(m) != machinev1beta1.PhaseFailed || ptr.Deref(m.Status.ErrorReason, "") != tc.reason ||
			m.Annotations[InstanceStateAnnotation] != UnknownInstanceState {
			t.Errorf("%s: phase %q errorReason %q instance-state %q; want Failed, %s, Unknown", name, phase(m),
				ptr.Deref(m.Status.ErrorReason, ""), m.Annotations[InstanceStateAnnotation], tc.reason)
		}
	}
}
