package cluster

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/machina-dev/machina/internal/controllers/internal/coalesce"
)

// Which descendant events bring the Cluster back at once and which wait to be coalesced.
func TestDescendantHandler(t *testing.T) {
	h := descendantHandler(&coalesce.Pacer{})
	ctx := context.Background()
	machine := func(cluster string, mutate func(*clusterv1.Machine)) *clusterv1.Machine {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m",
			Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}}}
		if mutate != nil {
			mutate(m)
		}
		return m
	}
	progressed := func(m *clusterv1.Machine) { m.Status.Phase = "Running" }
	deleting := func(m *clusterv1.Machine) { m.DeletionTimestamp = &metav1.Time{Time: time.Now()} }
	controlPlane := func(m *clusterv1.Machine) { m.Labels[clusterv1.MachineControlPlaneLabel] = "" }

	for _, tc := range []struct {
		name      string
		send      func(q workqueue.TypedRateLimitingInterface[reconcile.Request])
		now, late []string // Clusters queued at once, and only after the coalescing delay
	}{
		{"create", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Create(ctx, event.CreateEvent{Object: machine("a", nil)}, q)
		}, []string{"a"}, nil},
		{"delete", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Delete(ctx, event.DeleteEvent{Object: machine("a", nil)}, q)
		}, []string{"a"}, nil},
		{"no cluster label", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Create(ctx, event.CreateEvent{Object: machine("", nil)}, q)
		}, nil, nil},
		{"status only", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: machine("a", nil), ObjectNew: machine("a", progressed)}, q)
		}, nil, []string{"a"}},
		{"deletion starts", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: machine("a", nil), ObjectNew: machine("a", deleting)}, q)
		}, []string{"a"}, nil},
		{"role changes", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: machine("a", nil), ObjectNew: machine("a", controlPlane)}, q)
		}, []string{"a"}, nil},
		{"moves to another Cluster", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: machine("a", nil), ObjectNew: machine("b", nil)}, q)
		}, []string{"a", "b"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			tc.send(q)
			if got := drain(q, 0); !equal(got, tc.now) {
				t.Fatalf("queued at once: %v, want %v", got, tc.now)
			}
			if tc.late == nil {
				return
			}
			if got := drain(q, 10*coalesce.Delay); !equal(got, tc.late) {
				t.Fatalf("queued after the delay: %v, want %v", got, tc.late)
			}
		})
	}
}

// drain takes what the queue holds, waiting up to wait for the first item.
func drain(q workqueue.TypedRateLimitingInterface[reconcile.Request], wait time.Duration) []string {
	deadline := time.Now().Add(wait)
	for q.Len() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	var got []string
	for q.Len() > 0 {
		req, _ := q.Get()
		got = append(got, req.Name)
		q.Done(req)
	}
	return got
}

func equal(got, want []string) bool {
	slices.Sort(got)
	return slices.Equal(got, want)
}

// A Cluster whose last pass counted many descendants is not brought back at once, not even
// by a creation: it waits until that pass is PerChild per descendant old.
func TestDescendantHandlerPacesLargeClusters(t *testing.T) {
	pace := &coalesce.Pacer{}
	h := descendantHandler(pace)
	ctx := context.Background()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m",
		Labels: map[string]string{clusterv1.ClusterNameLabel: "big"}}}

	const children = 1500 // 1.5 s of space
	start := time.Now()
	pace.Passed(types.NamespacedName{Namespace: "ns", Name: "big"}, children)
	h.Create(ctx, event.CreateEvent{Object: m}, q)
	if got := drain(q, 0); len(got) != 0 {
		t.Fatalf("a Cluster of %d descendants was queued at once, right after its pass: %v", children, got)
	}
	if got := drain(q, 10*time.Second); !equal(got, []string{"big"}) {
		t.Fatalf("queued after the pacing: %v, want [big]", got)
	}
	if waited := time.Since(start); waited < children*coalesce.PerChild-50*time.Millisecond {
		t.Fatalf("queued after %v, want no sooner than %v", waited, children*coalesce.PerChild)
	}
}
