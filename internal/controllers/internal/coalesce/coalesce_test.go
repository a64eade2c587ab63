package coalesce

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestStatusOnly(t *testing.T) {
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "MachineSet", Name: "s", UID: "u1", Controller: ptr.To(true)}
	base := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "m", Labels: map[string]string{"a": "1"}, Annotations: map[string]string{"b": "2"},
			Finalizers: []string{"f"}, OwnerReferences: []metav1.OwnerReference{owner}}}
	}
	now := metav1.Now()
	for _, tc := range []struct {
		name   string
		change func(*corev1.Pod)
		want   bool
	}{
		{"status moved", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }, true},
		{"spec moved", func(p *corev1.Pod) { p.Spec.NodeName = "n" }, true},
		{"label changed", func(p *corev1.Pod) { p.Labels["a"] = "2" }, false},
		{"annotation added", func(p *corev1.Pod) { p.Annotations["c"] = "" }, false},
		{"finalizer removed", func(p *corev1.Pod) { p.Finalizers = nil }, false},
		{"deletion started", func(p *corev1.Pod) { p.DeletionTimestamp = &now }, false},
		{"released", func(p *corev1.Pod) { p.OwnerReferences = nil }, false},
		{"another controller", func(p *corev1.Pod) { p.OwnerReferences[0].UID = "u2" }, false},
	} {
		cur := base()
		tc.change(cur)
		if got := StatusOnly(base(), cur); got != tc.want {
			t.Errorf("%s: StatusOnly = %v, want %v", tc.name, got, tc.want)
		}
	}
	if StatusOnly(&corev1.Pod{}, &corev1.Pod{}) {
		t.Error("an uncontrolled child's update counted as status only")
	}
}

// MapLater queues what the map function names only after Delay, for every kind of event.
func TestMapLater(t *testing.T) {
	var p Pacer
	h := p.MapLater(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetName()}}}
	})
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	ctx := context.Background()
	h.Create(ctx, event.CreateEvent{Object: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}}}, q)
	h.Update(ctx, event.UpdateEvent{ObjectOld: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, ObjectNew: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b"}}}, q)
	h.Delete(ctx, event.DeleteEvent{Object: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "c"}}}, q)
	if n := q.Len(); n != 0 {
		t.Fatalf("%d requests queued at once", n)
	}
	deadline := time.Now().Add(10 * Delay)
	for q.Len() < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := q.Len(); n != 3 {
		t.Fatalf("%d requests after the delay, want 3 (a, b, c; the two for a folded into one)", n)
	}
}
