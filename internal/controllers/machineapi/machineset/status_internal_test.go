package machineset

import (
	"context"
	"slices"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/machina-dev/machina/internal/scheme"
)

// The counts of a MachineSet's status: every Machine not being deleted is a replica, one
// carrying the template's labels is fully labelled, one whose Node is Ready is ready, and
// available once it has been Ready for minReadySeconds; the pass asks to look again when the
// next one becomes available.
func TestUpdateStatusCounts(t *testing.T) {
	now := time.Now()
	node := func(name string, ready corev1.ConditionStatus, since time.Time) client.Object {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
			{Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(since)}}}}
	}
	machine := func(name, nodeName string, labelled, deleting bool) *machinev1beta1.Machine {
		m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"set": "a"}}}
		if labelled {
			m.Labels["role"] = "worker"
		}
		if deleting {
			m.DeletionTimestamp = ptr.To(metav1.NewTime(now))
		}
		if nodeName != "" {
			m.Status.NodeRef = &corev1.ObjectReference{Kind: "Node", Name: nodeName}
		}
		return m
	}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(
		node("long-ready", corev1.ConditionTrue, now.Add(-time.Hour)),
		node("just-ready", corev1.ConditionTrue, now.Add(-50*time.Second)),
		node("not-ready", corev1.ConditionFalse, now.Add(-time.Hour)),
		node("deleting", corev1.ConditionTrue, now.Add(-time.Hour)),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "no-conditions"}},
	).Build()
	ms := &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", Generation: 4},
		Spec: machinev1beta1.MachineSetSpec{MinReadySeconds: 60,
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"set": "a"}},
			Template: machinev1beta1.MachineTemplateSpec{ObjectMeta: machinev1beta1.ObjectMeta{Labels: map[string]string{"set": "a", "role": "worker"}}}}}
	machines := []*machinev1beta1.Machine{
		machine("available", "long-ready", true, false),
		machine("ready", "just-ready", true, false),
		machine("node-not-ready", "not-ready", false, false),
		machine("node-without-conditions", "no-conditions", false, false),
		machine("node-gone", "gone", false, false),
		machine("no-node", "", true, false),
		machine("being-deleted", "deleting", true, true),
	}
	var read []string
	lists := 0
	r := &Reconciler{Client: interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			read = append(read, key.Name)
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lists++
			return c.List(ctx, list, opts...)
		},
	})}
	requeue, err := r.updateStatus(context.Background(), ms, machines)
	if err != nil {
		t.Fatal(err)
	}
	got := ms.Status
	if got.Replicas != 6 || got.FullyLabeledReplicas != 3 || got.ReadyReplicas != 2 || got.AvailableReplicas != 1 {
		t.Errorf("replicas %d, fully labelled %d, ready %d, available %d; want 6, 3, 2, 1",
			got.Replicas, got.FullyLabeledReplicas, got.ReadyReplicas, got.AvailableReplicas)
	}
	if got.ObservedGeneration != 4 || got.LabelSelector != "set=a" {
		t.Errorf("observedGeneration %d, labelSelector %q; want 4, set=a", got.ObservedGeneration, got.LabelSelector)
	}
	// "ready" becomes available 10 s from now (60 s after its Node turned Ready).
	if requeue < 9*time.Second || requeue > 11*time.Second {
		t.Errorf("look again in %v, want about 10s", requeue)
	}

	// Only the Nodes of the set's Machines not being deleted are read, one by one: the cost
	// follows the set, not the cluster.
	if want := []string{"long-ready", "just-ready", "not-ready", "no-conditions", "gone"}; !slices.Equal(read, want) || lists != 0 {
		t.Errorf("read Nodes %v and listed %d times; want %v and no List", read, lists, want)
	}

	// No Machine with a Node: no Node is read, nothing is ready.
	ms.Status = machinev1beta1.MachineSetStatus{}
	if requeue, err := r.updateStatus(context.Background(), ms, []*machinev1beta1.Machine{machine("no-node", "", true, false)}); err != nil || requeue != 0 {
		t.Fatalf("requeue %v, error %v", requeue, err)
	}
	if ms.Status.Replicas != 1 || ms.Status.ReadyReplicas != 0 {
		t.Errorf("replicas %d, ready %d; want 1, 0", ms.Status.Replicas, ms.Status.ReadyReplicas)
	}
}
