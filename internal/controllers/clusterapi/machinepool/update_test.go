package machinepool_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
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
	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/capitest"
	"github.com/machina-dev/machina/internal/controllers/sim/simmachinepool"
)

// testDrain: deleting a MachinePool Machine drains its Node like any Machine's; a
// PodDisruptionBudget holds the drain (and with it the instance) until it is removed.
func testDrain(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	newPool(t, e, "dr", 1, nil)
	m := waitPool(t, e, "dr", 1, 90*time.Second)[0]
	nodeName := m.Status.NodeRef.Name

	app := map[string]string{"app": "dr"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "dr-web", Namespace: ns, Labels: app},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/app"}}}}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "dr", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: app}}}
	for _, o := range []client.Object{pod, pdb} {
		if err := e.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
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

	if err := e.Client.Delete(ctx, &m); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "drain blocked by the PDB", func(ctx context.Context) (bool, string, error) {
		cur := &clusterv1.Machine{}
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(&m), cur); err != nil {
			return false, err.Error(), nil
		}
		c := capitest.Condition(cur.Status.Conditions, clusterv1.MachineDeletingCondition)
		return strings.Contains(c, "DrainingNode") && strings.Contains(c, "cannot be evicted"), c, nil
	})
	time.Sleep(2 * time.Second)
	node := &corev1.Node{}
	if err := e.Client.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil || !node.Spec.Unschedulable {
		t.Fatalf("Node %s should be cordoned while draining: %v", nodeName, err)
	}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); err != nil {
		t.Fatalf("the PDB should keep the pod: %v", err)
	}
	if st := instanceOf(t, e, m.Spec.ProviderID).State; st != api.StateRunning {
		t.Fatalf("instance must keep running while the drain is blocked, is %s", st)
	}
	sm := &infrav1.SimMachine{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.Spec.InfrastructureRef.Name}, sm); err != nil || sm.DeletionTimestamp != nil {
		t.Fatalf("SimMachine deleted before the drain finished: %v", err)
	}

	if err := e.Client.Delete(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	capitest.WaitGone(t, e, &m, 60*time.Second)
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("the pod should have been evicted: %v", err)
	}
	if st := instanceOf(t, e, m.Spec.ProviderID).State; st != api.StateTerminated && st != api.StateShuttingDown {
		t.Errorf("instance after the Machine's deletion is %s", st)
	}
	if ev := capitest.EventReasons(t, e, m.Name); !contains(ev, "SuccessfulDrainNode") {
		t.Errorf("events of %s: %v", m.Name, ev)
	}
	// A Machine deleted by hand is replaced by the group.
	if after := waitPool(t, e, "dr", 1, 90*time.Second); after[0].Name == m.Name {
		t.Errorf("no replacement: %s", after[0].Name)
	}
}

// testRollingUpdate: a template change rolls out with maxSurge 1 while the number of ready
// Machines never drops below the desired count.
func testRollingUpdate(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	newPool(t, e, "ru", 2, func(smp *infrav1.SimMachinePool, _ *clusterv1.MachinePool) {
		smp.Spec.MaxSurge = ptr.To(intstr.FromInt32(1))
	})
	before := waitPool(t, e, "ru", 2, 90*time.Second)

	// Watch the pool while it rolls: the fewest ready and the most Machines seen.
	var mu sync.Mutex
	minReady, maxMachines := 1000, 0
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			ms, err := poolMachines(ctx, e, "ru")
			if err != nil {
				continue
			}
			ready := 0
			for i := range ms {
				if running(&ms[i]) {
					ready++
				}
			}
			mu.Lock()
			minReady, maxMachines = min(minReady, ready), max(maxMachines, len(ms))
			mu.Unlock()
		}
	}()

	smp := &infrav1.SimMachinePool{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ru"}, smp); err != nil {
		t.Fatal(err)
	}
	base := smp.DeepCopy()
	smp.Spec.Template.InstanceType = "s1.medium"
	if err := e.Client.Patch(ctx, smp, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	e.Eventually(150*time.Second, "rolled out", func(ctx context.Context) (bool, string, error) {
		ms, err := poolMachines(ctx, e, "ru")
		if err != nil {
			return false, err.Error(), nil
		}
		g := group(t, e, "ru")
		ok := len(ms) == 2 && g.DesiredCapacity == 2 && len(g.Instances) == 2
		for _, in := range g.Instances {
			ok = ok && in.LaunchTemplateVersion == g.LaunchTemplateVersion
		}
		for i := range ms {
			ok = ok && running(&ms[i]) && instanceOf(t, e, ms[i].Spec.ProviderID).InstanceType == "s1.medium"
		}
		return ok, fmt.Sprintf("group desired %d members %d; %s", g.DesiredCapacity, len(g.Instances), describe(ms, &clusterv1.MachinePool{})), nil
	})
	close(stop)
	<-done
	after := waitPool(t, e, "ru", 2, 30*time.Second)
	for _, m := range before {
		if names(after)[m.Name] {
			t.Errorf("outdated Machine %s survived the rollout", m.Name)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("during the rollout: at least %d ready Machines, at most %d Machines", minReady, maxMachines)
	if n := count(capitest.EventReasons(t, e, "ru"), "LaunchTemplateUpdated"); n != 1 || group(t, e, "ru").LaunchTemplateVersion != 2 {
		t.Errorf("%d LaunchTemplateUpdated events, template version %d: want exactly one update", n, group(t, e, "ru").LaunchTemplateVersion)
	}
	if minReady < 2 {
		t.Errorf("ready Machines dropped to %d during the rollout (want >= 2)", minReady)
	}
	if maxMachines < 3 || maxMachines > 4 {
		// 2 + maxSurge 1, plus at most one outdated Machine still draining.
		t.Errorf("at most %d Machines during the rollout, want a surge to 3", maxMachines)
	}
}

// testScaleOnly: a ScaleOnly pool shows a Machine per instance but refuses to delete one;
// it scales by changing the group's size.
func testScaleOnly(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	newPool(t, e, "so", 2, func(smp *infrav1.SimMachinePool, _ *clusterv1.MachinePool) {
		smp.Spec.Mode = infrav1.ScaleOnlyMode
	})
	waitPool(t, e, "so", 2, 90*time.Second)
	var ms []clusterv1.Machine
	e.Eventually(30*time.Second, "Machines marked scale-only", func(ctx context.Context) (bool, string, error) {
		var err error
		if ms, err = poolMachines(ctx, e, "so"); err != nil {
			return false, err.Error(), nil
		}
		ok := len(ms) == 2
		for _, m := range ms {
			ok = ok && m.Labels[simmachinepool.ScaleOnlyLabel] == "true"
		}
		return ok, fmt.Sprintf("%d Machines", len(ms)), nil
	})
	err := e.Client.Delete(ctx, &ms[0])
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(fmt.Sprint(err), "ScaleOnly") ||
		!strings.Contains(fmt.Sprint(err), "spec.replicas") {
		t.Fatalf("deleting a ScaleOnly pool's Machine: %v", err)
	}
	t.Logf("refused as expected: %v", err)
	cur := &clusterv1.Machine{}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(&ms[0]), cur); err != nil || cur.DeletionTimestamp != nil {
		t.Fatalf("the Machine should still be there: %v", err)
	}

	setReplicas(t, e, "so", 1)
	after := waitPool(t, e, "so", 1, 90*time.Second)
	if g := group(t, e, "so"); g.DesiredCapacity != 1 || len(g.Instances) != 1 || g.Instances[0].ProviderID != after[0].Spec.ProviderID {
		t.Errorf("group desired %d members %+v, Machine %s", g.DesiredCapacity, g.Instances, after[0].Spec.ProviderID)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func count(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}
