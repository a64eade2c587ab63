package pairwatch

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Of a restarted controller's first list, an object being deleted is queued ahead of the
// others (at a new event's priority), through both the own-kind and the mapped handler; a
// new event is unchanged.
func TestDeletingFirst(t *testing.T) {
	now := metav1.Now()
	for name, h := range map[string]handler.EventHandler{"EnqueueSelf": EnqueueSelf(), "ToMachineAPIKey": ToMachineAPIKey("mapi")} {
		t.Run(name, func(t *testing.T) {
			q := priorityqueue.New[reconcile.Request]("test")
			defer q.ShutDown()
			ctx := context.Background()
			for _, n := range []string{"a", "b", "c"} {
				h.Create(ctx, event.CreateEvent{Object: &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "mapi", Name: n}},
					IsInInitialList: true}, q)
			}
			h.Create(ctx, event.CreateEvent{Object: &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "mapi", Name: "doomed",
				DeletionTimestamp: &now, Finalizers: []string{"f"}}}, IsInInitialList: true}, q)
			h.Create(ctx, event.CreateEvent{Object: &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "mapi", Name: "new"}}}, q)
			got := map[string]int{}
			deadline := time.Now().Add(10 * time.Second)
			for len(got) < 5 && time.Now().Before(deadline) {
				item, prio, shutdown := q.GetWithPriority()
				if shutdown {
					t.Fatal("queue shut down")
				}
				if item.NamespacedName != (types.NamespacedName{Namespace: "mapi", Name: item.Name}) {
					t.Errorf("request %v, want namespace mapi", item)
				}
				got[item.Name] = prio
				q.Done(item)
			}
			for _, n := range []string{"a", "b", "c"} {
				if got[n] != handler.LowPriority {
					t.Errorf("%s of the first list: priority %d, want %d", n, got[n], handler.LowPriority)
				}
			}
			if got["doomed"] != 0 || got["new"] != 0 {
				t.Errorf("deleting object of the first list: priority %d, new object: %d, want 0 for both", got["doomed"], got["new"])
			}
		})
	}
}
