package coalesce

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The space a Pacer asks for grows with the children the parent's last pass counted and
// shrinks as that pass ages; an unknown or forgotten parent waits for nothing.
func TestPacerWait(t *testing.T) {
	var p Pacer
	key := types.NamespacedName{Namespace: "ns", Name: "parent"}
	if w := p.Wait(key); w != 0 {
		t.Fatalf("a parent never looked at waits %v", w)
	}
	p.Passed(key, 4000)
	if w := p.Wait(key); w <= 3*time.Second || w > 4*time.Second {
		t.Fatalf("right after a pass over 4000 children: wait %v, want just under 4s", w)
	}
	p.Passed(key, 10)
	if w := p.Wait(key); w > 10*time.Millisecond {
		t.Fatalf("after a pass over 10 children: wait %v, want at most 10ms", w)
	}
	p.Passed(key, 4000)
	p.Forget(key)
	if w := p.Wait(key); w != 0 {
		t.Fatalf("a forgotten parent waits %v", w)
	}
}

// Now queues at once unless the last pass is too recent; Later waits at least Delay, longer
// for a large parent.
func TestPacerNowAndLater(t *testing.T) {
	var p Pacer
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	small := reconcile.Request{NamespacedName: types.NamespacedName{Name: "small"}}
	large := reconcile.Request{NamespacedName: types.NamespacedName{Name: "large"}}
	p.Passed(small.NamespacedName, 1)
	p.Passed(large.NamespacedName, 2500)
	time.Sleep(5 * time.Millisecond)

	p.Now(q, small)
	p.Now(q, large)
	if q.Len() != 1 {
		t.Fatalf("queued at once: %d, want only the small parent", q.Len())
	}
	if req, _ := q.Get(); req != small {
		t.Fatalf("queued at once: %v, want %v", req, small)
	} else {
		q.Done(req)
	}

	start := time.Now()
	p.Later(q, small)
	req, _ := q.Get() // the large parent's Now comes first, ~2.5s after its pass
	q.Done(req)
	if req != small {
		t.Fatalf("first after Later: %v, want %v (Delay = %v)", req, small, Delay)
	}
	if waited := time.Since(start); waited < Delay-50*time.Millisecond {
		t.Fatalf("Later queued the small parent after %v, want about %v", waited, Delay)
	}
	req, _ = q.Get()
	q.Done(req)
	if waited := time.Since(start); req != large || waited < 2*time.Second {
		t.Fatalf("then %v after %v, want %v after about 2.5s", req, waited, large)
	}
}
