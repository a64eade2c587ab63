package drain_test

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/drain"
	"github.com/machina-dev/machina/internal/lab/labtest"
	"github.com/machina-dev/machina/internal/scheme"
)

func readyNode(name string, ready corev1.ConditionStatus) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready,
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}}}
}

func runningPod(t *testing.T, c client.Client, name, node string, labels map[string]string, owner *metav1.OwnerReference, annotations map[string]string) {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/pause"}}}}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if err := c.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
}

// finishTerminating plays the kubelet: it removes pods that have been asked to go.
func finishTerminating(t *testing.T, c client.Client) {
	t.Helper()
	var pods corev1.PodList
	if err := c.List(context.Background(), &pods); err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp != nil {
			if err := c.Delete(context.Background(), &pods.Items[i], client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
		}
	}
}

func TestDrainHonoursPDBAndSkipsDaemonSetAndMirrorPods(t *testing.T) {
	l := labtest.Start(t, labtest.WithControllerManager())
	ctx := context.Background()
	c, err := client.New(l.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, readyNode("n1", corev1.ConditionTrue)); err != nil {
		t.Fatal(err)
	}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "ds", Namespace: "default"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"ds": "x"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"ds": "x"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/pause"}}}}}}
	if err := c.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}
	app := map[string]string{"app": "web"}
	runningPod(t, c, "web-1", "n1", app, nil, nil)
	runningPod(t, c, "web-2", "n1", app, nil, nil)
	runningPod(t, c, "ds-pod", "n1", map[string]string{"ds": "x"},
		&metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: ds.UID, Controller: ptr.To(true)}, nil)
	runningPod(t, c, "static", "n1", nil, nil, map[string]string{drain.MirrorPodAnnotation: "x"})

	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: app}}}
	if err := c.Create(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	// Wait for the disruption controller to compute the budget.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pdb), pdb); err != nil {
			t.Fatal(err)
		}
		if pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.ExpectedPods == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("PDB status never computed: %+v", pdb.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}

	res, err := drain.Drain(ctx, c, c, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if res.Done || len(res.Blocked) != 2 || res.Evicted != 0 {
		t.Fatalf("a PDB with minAvailable=2 must block both evictions: %+v", res)
	}
	if !strings.Contains(res.Summary(), "cannot be evicted") {
		t.Errorf("summary %q does not say what blocks", res.Summary())
	}
	var node corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: "n1"}, &node); err != nil || !node.Spec.Unschedulable {
		t.Fatalf("node not cordoned: %v", err)
	}

	// Relax the budget: both pods may go.
	pdb.Spec.MinAvailable = ptr.To(intstr.FromInt32(0))
	if err := c.Update(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(60 * time.Second)
	for {
		res, err = drain.Drain(ctx, c, c, "n1")
		if err != nil {
			t.Fatal(err)
		}
		if res.Done {
			break
		}
		finishTerminating(t, c)
		if time.Now().After(deadline) {
			t.Fatalf("drain never finished: %+v", res)
		}
		time.Sleep(300 * time.Millisecond)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods); err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, p := range pods.Items {
		left = append(left, p.Name)
	}
	if strings.Join(left, ",") != "ds-pod,static" {
		t.Fatalf("pods left after drain: %v, want the DaemonSet and mirror pods only", left)
	}
}

func TestDrainUnreachableNodeDoesNotWaitForever(t *testing.T) {
	l := labtest.Start(t)
	ctx := context.Background()
	c, err := client.New(l.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, readyNode("dead", corev1.ConditionUnknown)); err != nil {
		t.Fatal(err)
	}
	runningPod(t, c, "stuck", "dead", nil, nil, nil)
	res, err := drain.Drain(ctx, c, c, "dead")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Unreachable || res.Evicted != 1 || res.Done {
		t.Fatalf("first pass: %+v", res)
	}
	var pod corev1.Pod
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "stuck"}, &pod); err != nil {
		t.Fatal(err)
	}
	if pod.DeletionGracePeriodSeconds == nil || *pod.DeletionGracePeriodSeconds != 1 {
		t.Fatalf("eviction on an unreachable Node must use a 1s grace period, got %v", pod.DeletionGracePeriodSeconds)
	}
	// No kubelet will ever finish the pod; once its deletion time plus the skip-wait has
	// passed, the drain is done anyway.
	time.Sleep(time.Until(pod.DeletionTimestamp.Add(drain.UnreachableSkipWait + 500*time.Millisecond)))
	if res, err = drain.Drain(ctx, c, c, "dead"); err != nil || !res.Done {
		t.Fatalf("drain of an unreachable Node must not wait for its pods: %+v %v", res, err)
	}
	if res, err = drain.Drain(ctx, c, c, "gone"); err != nil || !res.Done {
		t.Fatalf("a missing Node counts as drained: %+v %v", res, err)
	}
}
