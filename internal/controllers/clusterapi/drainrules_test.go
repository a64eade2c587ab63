package clusterapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/testenv"
)

// drainRule builds a MachineDrainRule for Machines labelled drain-test=machine and pods
// labelled app=app in the default Namespace.
func drainRule(name, machine, app string, behavior clusterv1.MachineDrainRuleDrainBehavior, order *int32) *clusterv1.MachineDrainRule {
	return &clusterv1.MachineDrainRule{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: clusterv1.MachineDrainRuleSpec{
			Drain: clusterv1.MachineDrainRuleDrainConfig{Behavior: behavior, Order: order},
			Machines: []clusterv1.MachineDrainRuleMachineSelector{{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"drain-test": machine}}}},
			Pods: []clusterv1.MachineDrainRulePodSelector{{
				Selector:          &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}}}}}
}

// holdFinalizer keeps an evicted pod terminating until the test lets it go.
const holdFinalizer = "machina.test/hold"

// testDrainRules: MachineDrainRules and the cluster.x-k8s.io/drain pod label decide the
// drain. Skip (label or rule) pods stay and do not hold the drain; a WaitCompleted pod is
// never evicted and holds the drain until it completes; pods are evicted by increasing
// order, a group only once the lower ones have left; a rule whose machine selector or
// namespace selector does not match is ignored. The Deleting condition names what the
// drain waits for.
func testDrainRules(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	newMachine(t, e, "main", "drain-rules", func(m *clusterv1.Machine) { m.Labels = map[string]string{"drain-test": "rules"} })
	m := waitPhase(t, e, "drain-rules", clusterv1.MachinePhaseRunning, 60*time.Second)
	node := m.Status.NodeRef.Name
	rules := []*clusterv1.MachineDrainRule{
		drainRule("a-skip", "rules", "skip-me", clusterv1.MachineDrainRuleDrainBehaviorSkip, nil),
		drainRule("b-first", "rules", "first", clusterv1.MachineDrainRuleDrainBehaviorDrain, ptr.To[int32](-10)),
		drainRule("c-last", "rules", "last", clusterv1.MachineDrainRuleDrainBehaviorDrain, ptr.To[int32](10)),
		drainRule("d-other-machines", "not-this-machine", "other", clusterv1.MachineDrainRuleDrainBehaviorSkip, nil),
	}
	// Sorted first, it would skip dr-first, but its namespaceSelector matches no pod's Namespace.
	elsewhere := drainRule("a0-first-elsewhere", "rules", "first", clusterv1.MachineDrainRuleDrainBehaviorSkip, nil)
	elsewhere.Spec.Pods[0].NamespaceSelector.MatchLabels[corev1.LabelMetadataName] = metav1.NamespaceSystem
	rules = append(rules, elsewhere)
	for _, r := range rules {
		if err := e.Client.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	pods := map[string]map[string]string{
		"dr-skip-label": {clusterv1.PodDrainLabel: "skip"},
		"dr-skip-rule":  {"app": "skip-me"},
		"dr-wait":       {clusterv1.PodDrainLabel: "wait-completed"},
		"dr-first":      {"app": "first"},
		"dr-last":       {"app": "last"},
		"dr-other":      {"app": "other"},
	}
	for name, labels := range pods {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/app"}}}}
		if name == "dr-first" {
			pod.Finalizers = []string{holdFinalizer}
		}
		if err := e.Client.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, r := range rules {
			_ = e.Client.Delete(ctx, r)
		}
		releasePod(t, e, "dr-first")
		for name := range pods {
			_ = e.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}},
				client.GracePeriodSeconds(0))
		}
	})
	waitPods(t, e, "pods running", func(p map[string]*corev1.Pod) bool {
		for name := range pods {
			if p[name] == nil || p[name].Status.Phase != corev1.PodRunning {
				return false
			}
		}
		return true
	})
	if err := e.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}

	// Order -10 goes first: held terminating by its finalizer, it keeps every other group
	// waiting.
	m = waitMachine(t, e, "drain-rules", "drain waiting for the order -10 group", 90*time.Second, func(m *clusterv1.Machine) bool {
		msg := condition(m.Status.Conditions, clusterv1.MachineDeletingCondition)
		return strings.Contains(msg, "waiting for 1 pod(s) to terminate: default/dr-first")
	})
	msg := condition(m.Status.Conditions, clusterv1.MachineDeletingCondition)
	if !strings.Contains(msg, "3 pod(s) of a later drain order: default/dr-last, default/dr-other, default/dr-wait") {
		t.Errorf("Deleting should name the pods of the later order groups: %s", msg)
	}
	got := getPods(t, e)
	for _, name := range []string{"dr-other", "dr-last", "dr-wait"} {
		if p := got[name]; p == nil || p.DeletionTimestamp != nil {
			t.Errorf("%s evicted while the order -10 group is still on the Node: %v", name, podStates(got))
		}
	}
	releasePod(t, e, "dr-first")

	// Order 0 next (dr-other, whose Skip rule is for other Machines, and the WaitCompleted
	// pod); order 10 waits for both.
	m = waitMachine(t, e, "drain-rules", "drain waiting for the wait-completed pod", 90*time.Second, func(m *clusterv1.Machine) bool {
		msg := condition(m.Status.Conditions, clusterv1.MachineDeletingCondition)
		return strings.Contains(msg, "waiting for 1 pod(s) to complete: default/dr-wait") && !strings.Contains(msg, "to terminate")
	})
	msg = condition(m.Status.Conditions, clusterv1.MachineDeletingCondition)
	if !strings.Contains(msg, "1 pod(s) of a later drain order: default/dr-last") {
		t.Errorf("Deleting should name the pod of the later order group: %s", msg)
	}
	got = getPods(t, e)
	if got["dr-first"] != nil || got["dr-other"] != nil {
		t.Errorf("dr-first (order -10) and dr-other (rule for other Machines ignored) should be evicted and gone: %v", podStates(got))
	}
	if p := got["dr-last"]; p == nil || p.DeletionTimestamp != nil {
		t.Errorf("dr-last (order 10) evicted before the order-0 group left: %v", podStates(got))
	}
	if p := got["dr-wait"]; p == nil || p.DeletionTimestamp != nil {
		t.Errorf("the wait-completed pod must never be evicted: %v", podStates(got))
	}

	// The WaitCompleted pod completes: the last group is evicted and the Machine goes.
	p := got["dr-wait"]
	p.Status.Phase = corev1.PodSucceeded
	if err := e.Client.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitGone(t, e, m, 90*time.Second)
	got = getPods(t, e)
	for _, name := range []string{"dr-skip-label", "dr-skip-rule"} {
		if p := got[name]; p == nil || p.DeletionTimestamp != nil {
			t.Errorf("skipped pod %s was evicted: %v", name, podStates(got))
		}
	}
	if got["dr-last"] != nil && got["dr-last"].DeletionTimestamp == nil {
		t.Errorf("dr-last was never evicted: %v", podStates(got))
	}
}

// releasePod removes the test's finalizer from a pod, if it is still there.
func releasePod(t *testing.T, e *testenv.Env, name string) {
	t.Helper()
	pod := &corev1.Pod{}
	if err := e.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
		return
	}
	if len(pod.Finalizers) == 0 {
		return
	}
	patch := client.MergeFrom(pod.DeepCopy())
	pod.Finalizers = nil
	if err := e.Client.Patch(context.Background(), pod, patch); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("releasing pod %s: %v", name, err)
	}
}

// getPods returns the test's pods (names starting dr-) by name.
func getPods(t *testing.T, e *testenv.Env) map[string]*corev1.Pod {
	t.Helper()
	var list corev1.PodList
	if err := e.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	out := map[string]*corev1.Pod{}
	for i := range list.Items {
		if strings.HasPrefix(list.Items[i].Name, "dr-") {
			out[list.Items[i].Name] = &list.Items[i]
		}
	}
	return out
}

func podStates(pods map[string]*corev1.Pod) string {
	var out []string
	for name, p := range pods {
		s := name + ":" + string(p.Status.Phase)
		if p.DeletionTimestamp != nil {
			s += "(terminating)"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func waitPods(t *testing.T, e *testenv.Env, what string, ok func(map[string]*corev1.Pod) bool) {
	t.Helper()
	e.Eventually(60*time.Second, what, func(context.Context) (bool, string, error) {
		got := getPods(t, e)
		return ok(got), podStates(got), nil
	})
}
