package machineapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/server"
	"github.com/machina-dev/machina/internal/controllers/machineapi"
	"github.com/machina-dev/machina/internal/controllers/machineapi/machine"
	"github.com/machina-dev/machina/internal/controllers/sim"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/testenv"
)

const ns = "default"

var env *testenv.Env

func startEnv(t *testing.T) *testenv.Env {
	return testenv.Start(t, testenv.Options{Groups: machineapi.GroupName + "," + sim.GroupName,
		Delays: server.Delays{Pending: 300 * time.Millisecond, ShuttingDown: 300 * time.Millisecond}})
}

func providerSpec(mutate func(*infrav1.SimMachineProviderSpec)) *runtime.RawExtension {
	ps := &infrav1.SimMachineProviderSpec{
		TypeMeta: metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: "SimMachineProviderSpec"},
		Region:   "sim-east-1", Zone: "sim-east-1a", InstanceType: "s1.large", Image: "sim-rhcos-9",
	}
	if mutate != nil {
		mutate(ps)
	}
	raw, _ := json.Marshal(ps)
	return &runtime.RawExtension{Raw: raw}
}

func newMachine(name string, mutate func(*infrav1.SimMachineProviderSpec)) *machinev1beta1.Machine {
	return &machinev1beta1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: providerSpec(mutate)}},
	}
}

func create(t *testing.T, e *testenv.Env, m *machinev1beta1.Machine) {
	t.Helper()
	if err := e.Client.Create(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

func get(ctx context.Context, e *testenv.Env, name string) (*machinev1beta1.Machine, error) {
	m := &machinev1beta1.Machine{}
	return m, e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, m)
}

func waitPhase(t *testing.T, e *testenv.Env, name, phase string, timeout time.Duration) *machinev1beta1.Machine {
	t.Helper()
	var m *machinev1beta1.Machine
	e.Eventually(timeout, fmt.Sprintf("Machine %s phase %s", name, phase), func(ctx context.Context) (bool, string, error) {
		var err error
		if m, err = get(ctx, e, name); err != nil {
			return false, err.Error(), nil
		}
		return ptr.Deref(m.Status.Phase, "") == phase, fmt.Sprintf("phase %q conditions %+v", ptr.Deref(m.Status.Phase, ""), m.Status.Conditions), nil
	})
	return m
}

func waitGone(t *testing.T, e *testenv.Env, name string, timeout time.Duration) {
	t.Helper()
	e.Eventually(timeout, "Machine "+name+" deleted", func(ctx context.Context) (bool, string, error) {
		m, err := get(ctx, e, name)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, err.Error(), nil
		}
		return false, fmt.Sprintf("phase %q conditions %+v", ptr.Deref(m.Status.Phase, ""), m.Status.Conditions), nil
	})
}

func condition(m *machinev1beta1.Machine, t machinev1beta1.ConditionType) string {
	c := mapicond.Get(m.Status.Conditions, t)
	if c == nil {
		return "<none>"
	}
	return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
}

func TestMachineAPI(t *testing.T) {
	env = startEnv(t)
	t.Run("ProvisionsToRunningWithLinkedNode", testProvision)
	t.Run("LifecycleHooksAndPDBHoldDeletion", testHooksAndDrain)
	t.Run("ExcludeNodeDraining", testExcludeDraining)
	t.Run("InstanceTerminatedBehindOurBackFails", testVanished)
	t.Run("InvalidProviderSpecFails", testInvalid)
	t.Run("CloudOutageRetriesWithoutFailing", testOutage)
	t.Run("ClusterAPIAuthoritativeIsLeftAlone", testPaused)
	t.Run("RestartMidProvisioningCreatesOneInstance", testRestart)
	t.Run("MachineSetDeletePolicies", testMachineSetDeletePolicies)
	t.Run("MachineSetDeleteAnnotationAdoptionAndCascade", testMachineSetDeleteAnnotationAdoptionAndCascade)
	t.Run("MachineSetClusterAPITemplate", testMachineSetClusterAPITemplate)
	t.Run("MachineSetMachinesBornWithFinalizer", testMachineSetMachinesBornWithFinalizer)
	t.Run("MachineSetProvisioningLimit", testMachineSetProvisioningLimit)
	t.Run("MHCRemediatesNotReadyNode", testMHCRemediatesNotReadyNode)
	t.Run("MHCNodeStartupTimeout", testMHCNodeStartupTimeout)
	t.Run("MHCShortCircuit", testMHCShortCircuit)
	t.Run("MHCExternalRemediation", testMHCExternalRemediation)
	t.Run("MHCOutageStopsRemediation", testMHCOutageStopsRemediation)
	t.Run("MHCPausedAnnotation", testMHCPausedAnnotation)
	t.Run("NodeLinkByIP", testNodeLinkByIP)
	t.Run("ManagerNodeProtected", testManagerNodeProtected)
}

func testProvision(t *testing.T) {
	e := env.For(t)
	m := newMachine("provision", nil)
	m.Spec.ObjectMeta.Labels = map[string]string{"node-role.kubernetes.io/worker": "", "team": "blue"}
	m.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "blue", Effect: corev1.TaintEffectNoSchedule}}
	create(t, e, m)
	waitPhase(t, e, "provision", machinev1beta1.PhaseRunning, 60*time.Second)
	// NodeLink marks the Machine Running with its Node; the Machine controller's next pass
	// records the instance's running state. (What the simulated actuator records besides,
	// providerStatus and the instance-type, region and zone labels, is TestSim's.)
	e.Eventually(30*time.Second, "instance-state running", func(ctx context.Context) (bool, string, error) {
		var err error
		if m, err = get(ctx, e, "provision"); err != nil {
			return false, err.Error(), nil
		}
		return m.Annotations[machine.InstanceStateAnnotation] == "running", m.Annotations[machine.InstanceStateAnnotation], nil
	})

	if m.Status.NodeRef == nil || m.Spec.ProviderID == nil || !strings.HasPrefix(*m.Spec.ProviderID, "sim://sim-east-1/sim-east-1a/") {
		t.Fatalf("running Machine lacks nodeRef or providerID: %+v %v", m.Status.NodeRef, m.Spec.ProviderID)
	}
	if len(m.Status.Addresses) == 0 || m.Annotations[machine.InstanceStateAnnotation] != "running" {
		t.Fatalf("addresses %v, instance-state %q", m.Status.Addresses, m.Annotations[machine.InstanceStateAnnotation])
	}
	if !mapicond.IsTrue(m.Status.Conditions, machinev1beta1.InstanceExistsCondition) {
		t.Errorf("InstanceExists: %s", condition(m, machinev1beta1.InstanceExistsCondition))
	}
	if c := mapicond.Get(m.Status.Conditions, gate.PausedCondition); c == nil || c.Status != corev1.ConditionFalse {
		t.Errorf("Paused should be False: %s", condition(m, gate.PausedCondition))
	}
	if m.Status.AuthoritativeAPI != machinev1beta1.MachineAuthorityMachineAPI {
		t.Errorf("status.authoritativeAPI = %q", m.Status.AuthoritativeAPI)
	}
	var node corev1.Node
	if err := e.Client.Get(context.Background(), client.ObjectKey{Name: m.Status.NodeRef.Name}, &node); err != nil {
		t.Fatal(err)
	}
	if node.Annotations[machine.NodeMachineAnnotation] != ns+"/provision" || node.Labels["team"] != "blue" {
		t.Errorf("Node not annotated/labelled: %v %v", node.Annotations, node.Labels)
	}
	if _, ok := node.Labels["node-role.kubernetes.io/worker"]; !ok {
		t.Errorf("node-role label missing on Node: %v", node.Labels)
	}
	found := false
	for _, taint := range node.Spec.Taints {
		found = found || (taint.Key == "dedicated" && taint.Value == "blue")
	}
	if !found {
		t.Errorf("taint not applied: %v", node.Spec.Taints)
	}
	if inst := e.MachineInstances(m); len(inst) != 1 || inst[0].ProviderID != *m.Spec.ProviderID || inst[0].State != api.StateRunning {
		t.Errorf("instances of the Machine (provider ID %s): %+v", *m.Spec.ProviderID, inst)
	}
	// The Machine's events tell its story: created (Provisioning -> Provisioned), then Running
	// once NodeLink linked its Node.
	var events corev1.EventList
	if err := e.Client.List(context.Background(), &events, client.InNamespace(ns),
		client.MatchingFields{"involvedObject.name": "provision"}); err != nil {
		t.Fatal(err)
	}
	created := false
	for _, ev := range events.Items {
		switch ev.Reason {
		case "Created":
			created = strings.Contains(ev.Message, "Provisioning -> Provisioned")
		case "PhaseProvisioned", "PhaseRunning": // a pass that re-read an older copy says it again
		default:
			t.Errorf("unexpected event %s: %s", ev.Reason, ev.Message)
		}
	}
	if !created {
		t.Errorf("no Created event telling Provisioning -> Provisioned: %+v", events.Items)
	}

	// Deleting the Machine terminates the instance and removes the Node.
	if err := e.Client.Delete(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	waitGone(t, e, "provision", 60*time.Second)
	inst := e.MachineInstances(m)
	if len(inst) != 1 || inst[0].State != api.StateTerminated {
		t.Errorf("instance after deletion: %+v", inst)
	}
	if err := e.Client.Get(context.Background(), client.ObjectKey{Name: node.Name}, &corev1.Node{}); !apierrors.IsNotFound(err) {
		t.Errorf("Node still there after the Machine was deleted: %v", err)
	}
}

func podOn(t *testing.T, e *testenv.Env, name, node string, labels map[string]string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/app"}}}}
	if err := e.Client.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

func testHooksAndDrain(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	m := newMachine("hooks", nil)
	m.Spec.LifecycleHooks = machinev1beta1.LifecycleHooks{
		PreDrain:     []machinev1beta1.LifecycleHook{{Name: "backup", Owner: "team-a"}},
		PreTerminate: []machinev1beta1.LifecycleHook{{Name: "detach", Owner: "team-b"}},
	}
	create(t, e, m)
	m = waitPhase(t, e, "hooks", machinev1beta1.PhaseRunning, 60*time.Second)
	nodeName := m.Status.NodeRef.Name

	app := map[string]string{"app": "hooks"}
	podOn(t, e, "hooks-web", nodeName, app)
	e.Eventually(30*time.Second, "pod running", func(ctx context.Context) (bool, string, error) {
		var p corev1.Pod
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hooks-web"}, &p); err != nil {
			return false, err.Error(), nil
		}
		return p.Status.Phase == corev1.PodRunning, string(p.Status.Phase), nil
	})
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "hooks", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: app}}}
	if err := e.Client.Create(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	e.Eventually(30*time.Second, "PDB computed", func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(pdb), pdb); err != nil {
			return false, err.Error(), nil
		}
		return pdb.Status.ExpectedPods == 1 && pdb.Status.ObservedGeneration == pdb.Generation, fmt.Sprintf("%+v", pdb.Status), nil
	})

	if err := e.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	// The preDrain hook holds everything.
	waitCondition(t, e, "hooks", machinev1beta1.MachineDrainable, corev1.ConditionFalse, machine.HookPresentReason)
	m, _ = get(ctx, e, "hooks")
	if !strings.Contains(condition(m, machinev1beta1.MachineDrainable), "backup") {
		t.Errorf("Drainable should name the hook: %s", condition(m, machinev1beta1.MachineDrainable))
	}
	removeHooks(t, e, "hooks", true, false)

	// The PDB blocks the drain.
	waitCondition(t, e, "hooks", machinev1beta1.MachineDrained, corev1.ConditionFalse, machine.DrainBlockedReason)
	if err := e.Client.Delete(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, e, "hooks", machinev1beta1.MachineDrained, corev1.ConditionTrue, machine.DrainFinishedReason)

	// The preTerminate hook holds the instance.
	waitCondition(t, e, "hooks", machinev1beta1.MachineTerminable, corev1.ConditionFalse, machine.HookPresentReason)
	if inst := e.MachineInstances(m); len(inst) != 1 || inst[0].State != api.StateRunning {
		t.Fatalf("instance must keep running while a preTerminate hook is present: %+v", inst)
	}
	removeHooks(t, e, "hooks", false, true)
	waitGone(t, e, "hooks", 60*time.Second)
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hooks-web"}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod should have been evicted: %v", err)
	}
}

func waitCondition(t *testing.T, e *testenv.Env, name string, ct machinev1beta1.ConditionType, status corev1.ConditionStatus, reason string) {
	t.Helper()
	e.Eventually(60*time.Second, fmt.Sprintf("%s %s=%s/%s", name, ct, status, reason), func(ctx context.Context) (bool, string, error) {
		m, err := get(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		c := mapicond.Get(m.Status.Conditions, ct)
		return c != nil && c.Status == status && c.Reason == reason, condition(m, ct), nil
	})
}

func removeHooks(t *testing.T, e *testenv.Env, name string, preDrain, preTerminate bool) {
	t.Helper()
	m, err := get(context.Background(), e, name)
	if err != nil {
		t.Fatal(err)
	}
	base := m.DeepCopy()
	if preDrain {
		m.Spec.LifecycleHooks.PreDrain = nil
	}
	if preTerminate {
		m.Spec.LifecycleHooks.PreTerminate = nil
	}
	if err := e.Client.Patch(context.Background(), m, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

func testExcludeDraining(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	m := newMachine("nodrain", nil)
	m.Annotations = map[string]string{machine.ExcludeNodeDrainingAnnotation: ""}
	create(t, e, m)
	m = waitPhase(t, e, "nodrain", machinev1beta1.PhaseRunning, 60*time.Second)
	app := map[string]string{"app": "nodrain"}
	podOn(t, e, "nodrain-web", m.Status.NodeRef.Name, app)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "nodrain", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: app}}}
	if err := e.Client.Create(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	// The PDB would block a drain forever; with the annotation there is none.
	waitGone(t, e, "nodrain", 60*time.Second)
	_ = e.Client.Delete(ctx, pdb)
}

func testVanished(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	m := newMachine("vanish", nil)
	create(t, e, m)
	m = waitPhase(t, e, "vanish", machinev1beta1.PhaseRunning, 60*time.Second)
	if _, err := e.Cloud.KillInstances(ctx, api.KillInstancesRequest{InstanceIDs: []string{e.MachineInstance(m).InstanceID}}); err != nil {
		t.Fatal(err)
	}
	m = waitPhase(t, e, "vanish", machinev1beta1.PhaseFailed, 60*time.Second)
	if ptr.Deref(m.Status.ErrorMessage, "") == "" || mapicond.IsTrue(m.Status.Conditions, machinev1beta1.InstanceExistsCondition) {
		t.Errorf("failed Machine should say why: %v %s", m.Status.ErrorMessage, condition(m, machinev1beta1.InstanceExistsCondition))
	}
	if err := e.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	waitGone(t, e, "vanish", 60*time.Second)
}

func testInvalid(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name, field string
		mutate      func(*infrav1.SimMachineProviderSpec)
	}{
		// Missing fields are refused by admission (config/admission); what only the cloud
		// knows is found by the controller.
		{"badimage", "spec.providerSpec.value.image", func(p *infrav1.SimMachineProviderSpec) { p.Image = "no-such-image" }},
		{"badtype", "spec.providerSpec.value.instanceType", func(p *infrav1.SimMachineProviderSpec) { p.InstanceType = "x9.huge" }},
	} {
		create(t, e, newMachine(tc.name, tc.mutate))
		m := waitPhase(t, e, tc.name, machinev1beta1.PhaseFailed, 60*time.Second)
		if ptr.Deref(m.Status.ErrorReason, "") != machinev1beta1.InvalidConfigurationMachineError ||
			!strings.Contains(ptr.Deref(m.Status.ErrorMessage, ""), tc.field) {
			t.Errorf("%s: errorReason %v errorMessage %q, want InvalidConfiguration naming %s",
				tc.name, ptr.Deref(m.Status.ErrorReason, ""), ptr.Deref(m.Status.ErrorMessage, ""), tc.field)
		}
		if err := e.Client.Delete(ctx, m); err != nil {
			t.Fatal(err)
		}
		waitGone(t, e, tc.name, 30*time.Second)
	}
}

func testOutage(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	f, err := e.Cloud.CreateFault(ctx, api.Fault{Kind: api.FaultError, Operation: api.OpRunInstances, StatusCode: 503})
	if err != nil {
		t.Fatal(err)
	}
	create(t, e, newMachine("outage", nil))
	e.Eventually(60*time.Second, "outage reported", func(ctx context.Context) (bool, string, error) {
		m, err := get(ctx, e, "outage")
		if err != nil {
			return false, err.Error(), nil
		}
		c := mapicond.Get(m.Status.Conditions, machinev1beta1.MachineCreation)
		return c != nil && c.Reason == "CloudUnavailable" && ptr.Deref(m.Status.Phase, "") == machinev1beta1.PhaseProvisioning,
			condition(m, machinev1beta1.MachineCreation), nil
	})
	if _, err := e.Cloud.DeleteFaults(ctx, f.FaultID); err != nil {
		t.Fatal(err)
	}
	m := waitPhase(t, e, "outage", machinev1beta1.PhaseRunning, 90*time.Second)
	if err := e.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	waitGone(t, e, "outage", 60*time.Second)
}

func testPaused(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	m := newMachine("capi-owned", nil)
	m.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
	create(t, e, m)
	e.Eventually(30*time.Second, "Paused=True", func(ctx context.Context) (bool, string, error) {
		m, err := get(ctx, e, "capi-owned")
		if err != nil {
			return false, err.Error(), nil
		}
		return mapicond.IsTrue(m.Status.Conditions, gate.PausedCondition), condition(m, gate.PausedCondition), nil
	})
	time.Sleep(3 * time.Second) // a few resyncs
	m, _ = get(ctx, e, "capi-owned")
	if len(m.Finalizers) != 0 || m.Status.Phase != nil || m.Spec.ProviderID != nil {
		t.Fatalf("a ClusterAPI-authoritative Machine was touched: finalizers %v phase %v providerID %v", m.Finalizers, m.Status.Phase, m.Spec.ProviderID)
	}
	if n := len(e.MachineInstances(m)); n != 0 {
		t.Fatalf("%d instances created for a ClusterAPI-authoritative Machine", n)
	}
	if err := e.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	waitGone(t, e, "capi-owned", 10*time.Second)
}

func testRestart(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	// Slow launches so the manager is stopped while RunInstances is in flight.
	f, err := e.Cloud.CreateFault(ctx, api.Fault{Kind: api.FaultLatency, Operation: api.OpRunInstances, LatencyMillis: 1500})
	if err != nil {
		t.Fatal(err)
	}
	before, err := e.Cloud.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	create(t, e, newMachine("restart", nil))
	e.Eventually(30*time.Second, "RunInstances in flight", func(ctx context.Context) (bool, string, error) {
		s, err := e.Cloud.Stats(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		n := s.Operations[api.OpRunInstances].Calls
		return n > before.Operations[api.OpRunInstances].Calls, fmt.Sprintf("%d RunInstances calls", n), nil
	})
	e.StopManager() // the launch is still in flight: the reconcile that made it is lost
	e.StartManager()
	m := waitPhase(t, e, "restart", machinev1beta1.PhaseRunning, 90*time.Second)
	if _, err := e.Cloud.DeleteFaults(ctx, f.FaultID); err != nil {
		t.Fatal(err)
	}
	if n := len(e.MachineInstances(m)); n != 1 {
		t.Fatalf("%d instances for one Machine after a restart mid-provisioning", n)
	}
}
