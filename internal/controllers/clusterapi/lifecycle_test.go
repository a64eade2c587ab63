package clusterapi_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/testenv"
)

const (
	preDrainHook     = clusterv1.PreDrainDeleteHookAnnotationPrefix + "/backup"
	preTerminateHook = clusterv1.PreTerminateDeleteHookAnnotationPrefix + "/detach"
)

// annotateSimMachine patches annotations onto a SimMachine (value "" removes the key).
func annotateSimMachine(t *testing.T, e *testenv.Env, name string, annotations map[string]*string) {
	t.Helper()
	sm, err := getSimMachine(context.Background(), e, name)
	if err != nil {
		t.Fatal(err)
	}
	base := sm.DeepCopy()
	for k, v := range annotations {
		if v == nil {
			delete(sm.Annotations, k)
			continue
		}
		if sm.Annotations == nil {
			sm.Annotations = map[string]string{}
		}
		sm.Annotations[k] = *v
	}
	if err := e.Client.Patch(context.Background(), sm, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

func waitPaused(t *testing.T, e *testenv.Env, obj client.Object, conditions func() []metav1.Condition) {
	t.Helper()
	e.Eventually(30*time.Second, fmt.Sprintf("%T %s Paused=True", obj, obj.GetName()), func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, err.Error(), nil
		}
		return isTrue(conditions(), clusterv1.PausedCondition), conds(conditions()), nil
	})
}

func testPausedAnnotation(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	// A paused Machine is not touched at all.
	m := newMachine(t, e, "main", "paused1", func(m *clusterv1.Machine) {
		m.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	})
	waitPaused(t, e, m, func() []metav1.Condition { return m.Status.Conditions })
	// A SimMachine carrying the annotation is not touched either, while its Machine goes on.
	annotateSimMachine(t, e, "paused1", map[string]*string{clusterv1.PausedAnnotation: ptr.To("")})
	patchMachine(t, e, "paused1", func(m *clusterv1.Machine) { delete(m.Annotations, clusterv1.PausedAnnotation) })
	sm := &infrav1.SimMachine{ObjectMeta: metav1.ObjectMeta{Name: "paused1", Namespace: ns}}
	waitPaused(t, e, sm, func() []metav1.Condition { return sm.Status.Conditions })
	waitMachine(t, e, "paused1", "owns its SimMachine", 30*time.Second, func(m *clusterv1.Machine) bool {
		s, err := getSimMachine(ctx, e, "paused1")
		return err == nil && metav1.GetControllerOf(s) != nil && m.Status.Phase == string(clusterv1.MachinePhaseProvisioning)
	})
	time.Sleep(3 * time.Second) // a few resyncs
	sm, _ = getSimMachine(ctx, e, "paused1")
	if len(sm.Finalizers) != 0 || sm.Spec.ProviderID != "" || sm.Status.Initialization.Provisioned != nil {
		t.Fatalf("a paused SimMachine was touched: finalizers %v providerID %q status %+v", sm.Finalizers, sm.Spec.ProviderID, sm.Status)
	}
	if n := len(instances(e, sm)); n != 0 {
		t.Fatalf("%d instances launched for a paused SimMachine", n)
	}
	// Unpaused, it provisions.
	annotateSimMachine(t, e, "paused1", map[string]*string{clusterv1.PausedAnnotation: nil})
	m = waitPhase(t, e, "paused1", clusterv1.MachinePhaseRunning, 60*time.Second)
	if c := condition(m.Status.Conditions, clusterv1.PausedCondition); !strings.HasPrefix(c, "False/") {
		t.Errorf("Paused after unpausing: %s", c)
	}

	// Paused from the start: no finalizer, no owner reference on the SimMachine. (Its
	// cluster-name label is admission's, set when it is created: config/admission.)
	m2 := newMachine(t, e, "main", "paused2", func(m *clusterv1.Machine) {
		m.Annotations = map[string]string{clusterv1.PausedAnnotation: "true"}
	})
	waitPaused(t, e, m2, func() []metav1.Condition { return m2.Status.Conditions })
	time.Sleep(3 * time.Second)
	m2, _ = getMachine(ctx, e, "paused2")
	sm2, _ := getSimMachine(ctx, e, "paused2")
	if len(m2.Finalizers) != 0 || m2.Status.Phase != "" || len(sm2.OwnerReferences) != 0 {
		t.Fatalf("a paused Machine was touched: finalizers %v phase %q SimMachine owners %v",
			m2.Finalizers, m2.Status.Phase, sm2.OwnerReferences)
	}
	for _, o := range []client.Object{m, m2, sm2} {
		if err := e.Client.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
		waitGone(t, e, o, 60*time.Second)
	}
}

func testPausedCluster(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	newCluster(t, e, "frozen", true)
	newMachine(t, e, "frozen", "frozen1", nil)
	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "frozen", Namespace: ns}}
	sc := &infrav1.SimCluster{ObjectMeta: metav1.ObjectMeta{Name: "frozen", Namespace: ns}}
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "frozen1", Namespace: ns}}
	waitPaused(t, e, cl, func() []metav1.Condition { return cl.Status.Conditions })
	waitPaused(t, e, sc, func() []metav1.Condition { return sc.Status.Conditions })
	waitPaused(t, e, m, func() []metav1.Condition { return m.Status.Conditions })
	time.Sleep(3 * time.Second)
	for _, o := range []client.Object{cl, sc, m} {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Fatal(err)
		}
		if len(o.GetFinalizers()) != 0 {
			t.Errorf("%T %s of a paused Cluster got finalizers %v", o, o.GetName(), o.GetFinalizers())
		}
	}
	if cl.Status.Initialization.InfrastructureProvisioned != nil || sc.Status.NetworkID != "" || len(sc.OwnerReferences) != 0 || m.Status.Phase != "" {
		t.Errorf("paused Cluster touched: cluster %+v SimCluster network %q owners %v Machine phase %q",
			cl.Status.Initialization, sc.Status.NetworkID, sc.OwnerReferences, m.Status.Phase)
	}

	// Unpausing lets everything run.
	base := cl.DeepCopy()
	cl.Spec.Paused = ptr.To(false)
	if err := e.Client.Patch(ctx, cl, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	m = waitPhase(t, e, "frozen1", clusterv1.MachinePhaseRunning, 60*time.Second)
	if c := condition(m.Status.Conditions, clusterv1.PausedCondition); !strings.HasPrefix(c, "False/") {
		t.Errorf("Machine Paused after unpausing: %s", c)
	}
	if err := e.Client.Delete(ctx, cl); err != nil {
		t.Fatal(err)
	}
	waitGone(t, e, cl, 90*time.Second)
}

func testDeletionSteps(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	newMachine(t, e, "main", "steps", func(m *clusterv1.Machine) {
		m.Annotations = map[string]string{preDrainHook: "", preTerminateHook: ""}
	})
	m := waitPhase(t, e, "steps", clusterv1.MachinePhaseRunning, 60*time.Second)
	nodeName := m.Status.NodeRef.Name
	sm, _ := getSimMachine(ctx, e, "steps")

	// A pod protected by a PodDisruptionBudget, and a volume attached to the Node.
	app := map[string]string{"app": "steps"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "steps-web", Namespace: ns, Labels: app},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/app"}}}}
	if err := e.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "steps", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: app}}}
	if err := e.Client.Create(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "pod running and PDB computed", func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err.Error(), nil
		}
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(pdb), pdb); err != nil {
			return false, err.Error(), nil
		}
		return pod.Status.Phase == corev1.PodRunning && pdb.Status.ExpectedPods == 1 && pdb.Status.ObservedGeneration == pdb.Generation,
			fmt.Sprintf("pod %s pdb %+v", pod.Status.Phase, pdb.Status), nil
	})
	setVolumes(t, e, nodeName, []corev1.AttachedVolume{{Name: "kubernetes.io/csi/sim^vol-1", DevicePath: "/dev/sdb"}})

	if err := e.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	// 1. The pre-drain hook holds everything: the Node is not even cordoned.
	m = waitDeleting(t, e, "steps", clusterv1.MachineDeletingWaitingForPreDrainHookReason)
	if !strings.Contains(condition(m.Status.Conditions, clusterv1.MachineDeletingCondition), preDrainHook) {
		t.Errorf("Deleting should name the hook: %s", condition(m.Status.Conditions, clusterv1.MachineDeletingCondition))
	}
	time.Sleep(2 * time.Second)
	node := &corev1.Node{}
	if err := e.Client.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil || node.Spec.Unschedulable {
		t.Fatalf("Node cordoned while a pre-drain hook is present: %v %v", node.Spec.Unschedulable, err)
	}
	patchMachine(t, e, "steps", func(m *clusterv1.Machine) { delete(m.Annotations, preDrainHook) })

	// 2. The PodDisruptionBudget holds the drain.
	waitMachine(t, e, "steps", "drain blocked by the PDB", 60*time.Second, func(m *clusterv1.Machine) bool {
		return strings.Contains(condition(m.Status.Conditions, clusterv1.MachineDeletingCondition), "DrainingNode: draining Node "+nodeName+": 1 pod(s) cannot be evicted")
	})
	if err := e.Client.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil || !node.Spec.Unschedulable {
		t.Fatalf("Node should be cordoned while draining: %v", err)
	}
	if err := e.Client.Delete(ctx, pdb); err != nil {
		t.Fatal(err)
	}

	// 3. The attached volume holds the deletion after the drain.
	m = waitDeleting(t, e, "steps", clusterv1.MachineDeletingWaitingForVolumeDetachReason)
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("the pod should be evicted before volumes are waited for: %v", err)
	}
	if m.Status.Deletion == nil || m.Status.Deletion.NodeDrainStartTime.IsZero() || m.Status.Deletion.WaitForNodeVolumeDetachStartTime.IsZero() {
		t.Errorf("status.deletion %+v", m.Status.Deletion)
	}
	setVolumes(t, e, nodeName, nil)

	// 4. The pre-terminate hook holds the infrastructure.
	waitDeleting(t, e, "steps", clusterv1.MachineDeletingWaitingForPreTerminateHookReason)
	time.Sleep(2 * time.Second)
	if insts := instances(e, sm); len(insts) != 1 || insts[0].State != api.StateRunning {
		t.Fatalf("instance must keep running while a pre-terminate hook is present: %+v", insts)
	}
	if s, err := getSimMachine(ctx, e, "steps"); err != nil || s.DeletionTimestamp != nil {
		t.Fatalf("SimMachine deleted while a pre-terminate hook is present: %v", err)
	}
	patchMachine(t, e, "steps", func(m *clusterv1.Machine) { delete(m.Annotations, preTerminateHook) })

	// 5-7. InfraMachine, Node, finalizer.
	waitGone(t, e, m, 60*time.Second)
	if insts := instances(e, sm); len(insts) != 1 || insts[0].State != api.StateTerminated {
		t.Errorf("instance after deletion: %+v", insts)
	}
	if err := e.Client.Get(ctx, client.ObjectKey{Name: nodeName}, &corev1.Node{}); !apierrors.IsNotFound(err) {
		t.Errorf("Node still there: %v", err)
	}
	reasons := eventReasons(t, e, "steps")
	// (The Node may be gone before step 6: the simulated kubelet removes the Node of a
	// terminated instance, so there is no SuccessfulDeleteNode event to expect.)
	order := []string{"WaitingForPreDrainHook", "SuccessfulDrainNode", "WaitingForPreTerminateHook", "InstanceTerminating", "Deleted"}
	last := -1
	for _, r := range order {
		i := indexOf(reasons, r)
		if i <= last {
			t.Errorf("event %s out of order (want %v): %v", r, order, reasons)
		}
		last = i
	}
}

// setVolumes sets the Node's status.volumesAttached, as the attach/detach controller would.
func setVolumes(t *testing.T, e *testenv.Env, nodeName string, vols []corev1.AttachedVolume) {
	t.Helper()
	e.Eventually(30*time.Second, "volumes set on Node "+nodeName, func(ctx context.Context) (bool, string, error) {
		node := &corev1.Node{}
		if err := e.Client.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
			return false, err.Error(), nil
		}
		node.Status.VolumesAttached = vols
		if err := e.Client.Status().Update(ctx, node); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
}

func testRestart(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	// Slow launches, so the manager is stopped while RunInstances is in flight.
	f, err := e.Cloud.CreateFault(ctx, api.Fault{Kind: api.FaultLatency, Operation: api.OpRunInstances, LatencyMillis: 1500})
	if err != nil {
		t.Fatal(err)
	}
	before, err := e.Cloud.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	newMachine(t, e, "main", "restart", nil)
	e.Eventually(30*time.Second, "RunInstances in flight", func(ctx context.Context) (bool, string, error) {
		s, err := e.Cloud.Stats(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		n := s.Operations[api.OpRunInstances].Calls
		return n > before.Operations[api.OpRunInstances].Calls, fmt.Sprintf("%d RunInstances calls", n), nil
	})
	// Crash safety: the finalizer was stored before the launch, not with its results.
	if sm, err := getSimMachine(ctx, e, "restart"); err != nil {
		t.Fatal(err)
	} else if !controllerutilHasFinalizer(sm, infrav1.SimMachineFinalizer) || sm.Spec.ProviderID != "" {
		t.Fatalf("SimMachine during the launch: finalizers %v providerID %q; want the finalizer stored and no providerID yet",
			sm.Finalizers, sm.Spec.ProviderID)
	}
	e.StopManager() // the reconcile that made the call is lost
	e.StartManager()
	m := waitPhase(t, e, "restart", clusterv1.MachinePhaseRunning, 90*time.Second)
	if _, err := e.Cloud.DeleteFaults(ctx, f.FaultID); err != nil {
		t.Fatal(err)
	}
	sm, _ := getSimMachine(ctx, e, "restart")
	if n := len(instances(e, sm)); n != 1 {
		t.Fatalf("%d instances for one SimMachine after a restart mid-provisioning", n)
	}
	if err := e.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	waitGone(t, e, m, 60*time.Second)
}

func testClusterDeletion(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	cl := newCluster(t, e, "doomed", false)
	sc := &infrav1.SimCluster{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "doomed"}, sc); err != nil {
		t.Fatal(err)
	}
	newMachine(t, e, "doomed", "doomed1", func(m *clusterv1.Machine) {
		m.Annotations = map[string]string{preTerminateHook: ""}
	})
	ms := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "doomed-workers", Namespace: ns,
		Labels: map[string]string{clusterv1.ClusterNameLabel: "doomed"}},
		Spec: clusterv1.MachineSetSpec{ClusterName: "doomed", Replicas: ptr.To[int32](0),
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"set": "doomed-workers"}},
			Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"set": "doomed-workers"}},
				Spec: clusterv1.MachineSpec{ClusterName: "doomed", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To(bootstrapData)},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "SimMachineTemplate", Name: "none"}}}}}
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	m := waitPhase(t, e, "doomed1", clusterv1.MachinePhaseRunning, 60*time.Second)

	if err := e.Client.Delete(ctx, cl); err != nil {
		t.Fatal(err)
	}
	// The Machine is deleted first; the hook keeps it, and so the SimCluster must stay.
	waitDeleting(t, e, "doomed1", clusterv1.MachineDeletingWaitingForPreTerminateHookReason)
	waitGone(t, e, ms, 30*time.Second)
	e.Eventually(30*time.Second, "Cluster waits for its workers", func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(cl), cl); err != nil {
			return false, err.Error(), nil
		}
		c := condition(cl.Status.Conditions, clusterv1.ClusterDeletingCondition)
		return strings.Contains(c, "WaitingForWorkersDeletion") && strings.Contains(c, "Machine doomed1"), c, nil
	})
	time.Sleep(2 * time.Second)
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(sc), sc); err != nil || sc.DeletionTimestamp != nil {
		t.Fatalf("SimCluster deleted while the Cluster's Machines exist: %v %v", sc.DeletionTimestamp, err)
	}
	patchMachine(t, e, "doomed1", func(m *clusterv1.Machine) { delete(m.Annotations, preTerminateHook) })
	waitGone(t, e, m, 60*time.Second)
	waitGone(t, e, sc, 60*time.Second)
	waitGone(t, e, cl, 60*time.Second)
	if nets, err := e.Cloud.DescribeNetworks(ctx, api.DescribeNetworksRequest{Tags: map[string]string{"machina.dev/simcluster-uid": string(sc.UID)}}); err != nil || len(nets) != 0 {
		t.Errorf("network of the deleted SimCluster: %+v %v", nets, err)
	}
	reasons := eventReasons(t, e, "doomed")
	if i, j := indexOf(reasons, "InfrastructureDeleted"), indexOf(reasons, "Deleted"); i < 0 || j < i {
		t.Errorf("Cluster events out of order: %v", reasons)
	}
}
