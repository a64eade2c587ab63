package machine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/scheme"
)

// fakeActuator is an in-memory cloud of one instance, recording the calls it gets.
type fakeActuator struct {
	exists                          bool
	state                           string // the instance-state annotation Exists and Create write
	existsErr, createErr, deleteErr error
	calls                           []string
	onExists                        func() // called at each Exists, if set
}

func (a *fakeActuator) Exists(_ context.Context, m *machinev1beta1.Machine) (bool, error) {
	a.calls = append(a.calls, "Exists")
	if a.onExists != nil {
		a.onExists()
	}
	if a.existsErr != nil {
		return false, a.existsErr
	}
	if a.state != "" {
		setState(m, a.state)
	}
	return a.exists, nil
}

func (a *fakeActuator) Create(_ context.Context, m *machinev1beta1.Machine) error {
	a.calls = append(a.calls, "Create")
	if a.createErr != nil {
		return a.createErr
	}
	a.exists = true
	m.Spec.ProviderID = ptr.To("sim:///sim-east-1a/i-1")
	setState(m, "running")
	return nil
}

func setState(m *machinev1beta1.Machine, state string) {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[InstanceStateAnnotation] = state
}

func (a *fakeActuator) Update(context.Context, *machinev1beta1.Machine) error {
	a.calls = append(a.calls, "Update")
	return nil
}

func (a *fakeActuator) Delete(context.Context, *machinev1beta1.Machine) error {
	a.calls = append(a.calls, "Delete")
	return a.deleteErr
}

// phaseCase is one pass of the controller over one stored Machine.
type phaseCase struct {
	name     string
	machine  func(m *machinev1beta1.Machine) // changes to a provisioned-nothing, finalized Machine
	deleting bool                            // the Machine is deleted before the pass
	actuator fakeActuator
	kinds    []string // Reconciler.ProviderSpecKinds

	wantPhase     string
	wantConds     map[machinev1beta1.ConditionType]string // type → "Status/Reason"
	wantCalls     string                                  // the actuator's calls, comma-separated
	wantFinalizer bool
	wantGone      bool // the deleted Machine let go (the fake client removes it)
	wantRequeue   time.Duration
	wantErr       bool
	wantEvents    []string // reasons
}

// The Machine controller's passes, one step each, as Cluster API tests its machine controller's
// phases: what the actuator is asked, and the phase, conditions, finalizer, requeue and events
// the pass stores. The lab suite (TestMachineAPI) covers the same controller end to end.
func TestMachinePhases(t *testing.T) {
	const resync = time.Minute
	cases := []phaseCase{
		{name: "new Machine: finalizer stored, instance created, Provisioned",
			machine:   func(m *machinev1beta1.Machine) { m.Finalizers = nil },
			wantPhase: machinev1beta1.PhaseProvisioned, wantCalls: "Exists,Create", wantFinalizer: true, wantRequeue: resync,
			wantConds: map[machinev1beta1.ConditionType]string{machinev1beta1.InstanceExistsCondition: "True/InstanceExists",
				machinev1beta1.MachineCreation: "True/MachineCreationSucceeded", gate.PausedCondition: "False/" + gate.AuthoritativeAPIMachineAPIReason},
			wantEvents: []string{"Created"}},
		{name: "instance exists, Node linked: Running",
			machine: func(m *machinev1beta1.Machine) {
				m.Spec.ProviderID = ptr.To("sim:///sim-east-1a/i-1")
				m.Status.NodeRef = &corev1.ObjectReference{Name: "node-1"}
			},
			actuator:  fakeActuator{exists: true, state: "running"},
			wantPhase: machinev1beta1.PhaseRunning, wantCalls: "Exists,Update", wantFinalizer: true, wantRequeue: resync,
			wantConds:  map[machinev1beta1.ConditionType]string{machinev1beta1.InstanceExistsCondition: "True/InstanceExists"},
			wantEvents: []string{"PhaseRunning"}},
		{name: "instance pending: Provisioned, looked at again soon",
			machine:   func(m *machinev1beta1.Machine) { m.Spec.ProviderID = ptr.To("sim:///sim-east-1a/i-1") },
			actuator:  fakeActuator{exists: true, state: "pending"},
			wantPhase: machinev1beta1.PhaseProvisioned, wantCalls: "Exists,Update", wantFinalizer: true, wantRequeue: PendingRequeue,
			wantEvents: []string{"PhaseProvisioned"}},
		{name: "instance gone after provisioning: Failed",
			machine: func(m *machinev1beta1.Machine) {
				m.Spec.ProviderID = ptr.To("sim:///sim-east-1a/i-1")
				m.Status.Phase = ptr.To(machinev1beta1.PhaseRunning)
			},
			wantPhase: machinev1beta1.PhaseFailed, wantCalls: "Exists", wantFinalizer: true,
			wantConds:  map[machinev1beta1.ConditionType]string{machinev1beta1.InstanceExistsCondition: "False/InstanceMissing"},
			wantEvents: []string{"PhaseFailed", string(machinev1beta1.CreateMachineError)}},
		{name: "cloud throttles the create: Provisioning, retried after its delay",
			actuator:  fakeActuator{createErr: RequeueAfter(7*time.Second, "Throttled", errors.New("slow down"))},
			wantPhase: machinev1beta1.PhaseProvisioning, wantCalls: "Exists,Create", wantFinalizer: true, wantRequeue: 7 * time.Second,
			wantConds:  map[machinev1beta1.ConditionType]string{machinev1beta1.MachineCreation: "False/Throttled"},
			wantEvents: []string{"PhaseProvisioning", "Throttled"}},
		{name: "create fails: Provisioning, the error backs off",
			actuator:  fakeActuator{createErr: errors.New("boom")},
			wantPhase: machinev1beta1.PhaseProvisioning, wantCalls: "Exists,Create", wantFinalizer: true, wantErr: true,
			wantConds:  map[machinev1beta1.ConditionType]string{machinev1beta1.MachineCreation: "False/CreateError"},
			wantEvents: []string{"PhaseProvisioning", "CreateError"}},
		{name: "invalid configuration: Failed, no retry",
			actuator:  fakeActuator{createErr: InvalidConfiguration("spec.providerSpec.value.image: no such image")},
			wantPhase: machinev1beta1.PhaseFailed, wantCalls: "Exists,Create", wantFinalizer: true,
			wantConds:  map[machinev1beta1.ConditionType]string{machinev1beta1.MachineCreation: "False/" + string(machinev1beta1.InvalidConfigurationMachineError)},
			wantEvents: []string{"PhaseProvisioning", "PhaseFailed", string(machinev1beta1.InvalidConfigurationMachineError)}},
		{name: "cloud unreachable: InstanceExists Unknown, the error backs off",
			actuator: fakeActuator{existsErr: errors.New("connection refused")}, wantCalls: "Exists", wantFinalizer: true, wantErr: true,
			wantConds:  map[machinev1beta1.ConditionType]string{machinev1beta1.InstanceExistsCondition: "Unknown/ErrorCheckingProvider"},
			wantEvents: []string{"ErrorCheckingProvider"}},
		{name: "Failed is terminal: no cloud call",
			machine:   func(m *machinev1beta1.Machine) { m.Status.Phase = ptr.To(machinev1beta1.PhaseFailed) },
			wantPhase: machinev1beta1.PhaseFailed, wantFinalizer: true},
		{name: "another platform's Machine: left alone",
			kinds:   []string{"AWSMachineProviderConfig"},
			machine: func(m *machinev1beta1.Machine) { m.Finalizers = nil }},
		{name: "Cluster API-authoritative: paused, the unrecorded instance looked up first",
			machine:   func(m *machinev1beta1.Machine) { m.Status.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI },
			actuator:  fakeActuator{exists: true, state: "running"},
			wantCalls: "Exists,Update", wantFinalizer: true,
			wantConds: map[machinev1beta1.ConditionType]string{gate.PausedCondition: "True/" + gate.AuthoritativeAPINotMachineAPIReason}},
		{name: "paused, the lookup fails: not Paused until the instance is recorded",
			machine:   func(m *machinev1beta1.Machine) { m.Status.AuthoritativeAPI = machinev1beta1.MachineAuthorityMigrating },
			actuator:  fakeActuator{existsErr: errors.New("connection refused")},
			wantCalls: "Exists", wantFinalizer: true, wantRequeue: PendingRequeue,
			wantConds: map[machinev1beta1.ConditionType]string{gate.PausedCondition: "False/" + RecordingInstanceReason}},
		{name: "paused with its instance named: no cloud call",
			machine: func(m *machinev1beta1.Machine) {
				m.Status.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
				m.Spec.ProviderID = ptr.To("sim:///sim-east-1a/i-1")
			},
			wantFinalizer: true,
			wantConds:     map[machinev1beta1.ConditionType]string{gate.PausedCondition: "True/" + gate.AuthoritativeAPINotMachineAPIReason}},
		{name: "deleted with a preDrain hook: held, Deleting",
			machine: func(m *machinev1beta1.Machine) {
				m.Spec.LifecycleHooks.PreDrain = []machinev1beta1.LifecycleHook{{Name: "hold", Owner: "test"}}
			},
			deleting: true, wantPhase: machinev1beta1.PhaseDeleting, wantFinalizer: true,
			wantConds:  map[machinev1beta1.ConditionType]string{machinev1beta1.MachineDrainable: "False/" + HookPresentReason},
			wantEvents: []string{"PhaseDeleting"}},
		{name: "deleted with a preTerminate hook: no Node to drain, instance kept",
			machine: func(m *machinev1beta1.Machine) {
				m.Spec.LifecycleHooks.PreTerminate = []machinev1beta1.LifecycleHook{{Name: "hold", Owner: "test"}}
			},
			deleting: true, wantPhase: machinev1beta1.PhaseDeleting, wantFinalizer: true,
			wantConds: map[machinev1beta1.ConditionType]string{machinev1beta1.MachineDrained: "True/" + NoNodeReason,
				machinev1beta1.MachineTerminable: "False/" + HookPresentReason},
			wantEvents: []string{"PhaseDeleting"}},
		{name: "deleted, instance running: its deletion started, waited for",
			deleting: true, actuator: fakeActuator{exists: true},
			wantPhase: machinev1beta1.PhaseDeleting, wantCalls: "Exists,Delete", wantFinalizer: true, wantRequeue: PendingRequeue,
			wantConds:  map[machinev1beta1.ConditionType]string{machinev1beta1.InstanceExistsCondition: "True/InstanceDeleting"},
			wantEvents: []string{"PhaseDeleting"}},
		{name: "deleted, instance delete throttled: retried after its delay",
			deleting: true, actuator: fakeActuator{exists: true, deleteErr: RequeueAfter(3*time.Second, "Throttled", errors.New("slow down"))},
			wantPhase: machinev1beta1.PhaseDeleting, wantCalls: "Exists,Delete", wantFinalizer: true, wantRequeue: 3 * time.Second,
			wantConds:  map[machinev1beta1.ConditionType]string{machinev1beta1.InstanceExistsCondition: "Unknown/Throttled"},
			wantEvents: []string{"PhaseDeleting"}},
		{name: "deleted, drain excluded, instance gone: the Machine let go",
			machine: func(m *machinev1beta1.Machine) {
				m.Annotations[ExcludeNodeDrainingAnnotation] = ""
				m.Status.NodeRef = &corev1.ObjectReference{Name: "node-1"} // already gone: not an error
			},
			deleting: true, wantCalls: "Exists", wantGone: true, wantEvents: []string{"PhaseDeleting", DrainSkippedReason, "Deleted"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { runPhaseCase(t, tc, resync) })
	}
}

func runPhaseCase(t *testing.T, tc phaseCase, resync time.Duration) {
	ctx := context.Background()
	m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m",
		Finalizers: []string{machinev1beta1.MachineFinalizer}, Annotations: map[string]string{}}}
	m.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: []byte(`{"kind":"SimMachineProviderSpec"}`)}
	m.Status.AuthoritativeAPI = machinev1beta1.MachineAuthorityMachineAPI
	if tc.machine != nil {
		tc.machine(m)
	}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(m).WithStatusSubresource(m).Build()
	if tc.deleting {
		if err := c.Delete(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	rec := record.NewFakeRecorder(20)
	a := tc.actuator
	r := &Reconciler{Client: c, APIReader: c, Actuator: &a, Recorder: rec, Resync: resync, ProviderSpecKinds: tc.kinds}
	res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(m)})
	if (err != nil) != tc.wantErr {
		t.Errorf("err %v, want error %v", err, tc.wantErr)
	}
	// Jittered resyncs land within a fifth of the period either side.
	if got := res.RequeueAfter; got < tc.wantRequeue*4/5 || got > tc.wantRequeue*6/5 {
		t.Errorf("requeue after %s, want %s", got, tc.wantRequeue)
	}
	if got := strings.Join(a.calls, ","); got != tc.wantCalls {
		t.Errorf("actuator calls %q, want %q", got, tc.wantCalls)
	}
	checkEvents(t, rec, tc.wantEvents)
	stored := &machinev1beta1.Machine{}
	err = c.Get(ctx, client.ObjectKeyFromObject(m), stored)
	if tc.wantGone {
		if err == nil {
			t.Errorf("the deleted Machine is still stored, finalizers %v", stored.Finalizers)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	checkStored(t, stored, tc)
}

func checkStored(t *testing.T, m *machinev1beta1.Machine, tc phaseCase) {
	t.Helper()
	if got := phase(m); got != tc.wantPhase {
		t.Errorf("phase %q, want %q", got, tc.wantPhase)
	}
	if got := controllerutil.ContainsFinalizer(m, machinev1beta1.MachineFinalizer); got != tc.wantFinalizer {
		t.Errorf("finalizer stored %v, want %v", got, tc.wantFinalizer)
	}
	for typ, want := range tc.wantConds {
		c := mapicond.Get(m.Status.Conditions, typ)
		if c == nil {
			t.Errorf("no %s condition, want %s", typ, want)
			continue
		}
		if got := string(c.Status) + "/" + c.Reason; got != want {
			t.Errorf("%s %s (%s), want %s", typ, got, c.Message, want)
		}
	}
}

func checkEvents(t *testing.T, rec *record.FakeRecorder, want []string) {
	t.Helper()
	var got []string
	for len(rec.Events) > 0 {
		// FakeRecorder's events read "<type> <reason> <message>".
		got = append(got, strings.Fields(<-rec.Events)[1])
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("events %v, want %v", got, want)
	}
}
