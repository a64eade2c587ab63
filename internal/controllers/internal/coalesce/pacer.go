package coalesce

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// PerChild is how far apart a Pacer spaces the passes of a parent, per child its last pass
// counted: a Cluster of 5,000 Machines is looked at once every 5 s at most while they come
// up, one of ten every 10 ms. A pass lists and weighs every child, so its cost grows with
// the children and so does the space between passes: the parent's share of the manager's
// CPU stays flat as the fleet grows (the Cluster's passes were a fifth of it at 5,000
// Machines when a Machine's creation brought its Cluster back at once, profiled in
// capi-scale -n 5000).
const PerChild = time.Millisecond

// Pacer remembers when each parent's last pass listed its children and how many it found.
// What it knows is only an optimisation: a parent it does not know (a new leader, a parent
// never looked at) is brought back at once. The zero value is ready to use.
type Pacer struct {
	mu   sync.Mutex
	last map[types.NamespacedName]pass
}

type pass struct {
	at       time.Time
	children int
}

// Passed records that key's pass listed its children now and found n.
func (p *Pacer) Passed(key types.NamespacedName, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		p.last = map[types.NamespacedName]pass{}
	}
	p.last[key] = pass{at: time.Now(), children: n}
}

// Forget drops what the pacer knows of key (the parent is gone).
func (p *Pacer) Forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.last, key)
}

// Wait is how long key's next pass should wait: until its last pass is PerChild times the
// children it counted old, 0 when that is past or no pass is known.
func (p *Pacer) Wait(key types.NamespacedName) time.Duration {
	p.mu.Lock()
	l, ok := p.last[key]
	p.mu.Unlock()
	if !ok {
		return 0
	}
	return max(0, time.Duration(l.children)*PerChild-time.Since(l.at))
}

// Now queues req for a change the parent acts on: at once, unless its last pass was too
// recent for its size.
func (p *Pacer) Now(q workqueue.TypedRateLimitingInterface[reconcile.Request], req reconcile.Request) {
	if wait := p.Wait(req.NamespacedName); wait > 0 {
		q.AddAfter(req, wait)
		return
	}
	q.Add(req)
}

// Later queues req for a change that only moves the parent's counts: Delay later, or later
// still when the parent's size asks for more space between its passes.
func (p *Pacer) Later(q workqueue.TypedRateLimitingInterface[reconcile.Request], req reconcile.Request) {
	q.AddAfter(req, max(Delay, p.Wait(req.NamespacedName)))
}

// MapLater is handler.EnqueueRequestsFromMapFunc with every request queued as Later does,
// for a watch whose events only ever move the parent's counts (a Node's readiness for the
// MachineSet whose Machine it belongs to).
func (p *Pacer) MapLater(fn handler.MapFunc) handler.Funcs {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	add := func(ctx context.Context, o client.Object, q queue) {
		for _, req := range fn(ctx, o) {
			p.Later(q, req)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) { add(ctx, e.Object, q) },
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q queue) {
			add(ctx, e.ObjectOld, q)
			add(ctx, e.ObjectNew, q)
		},
		DeleteFunc:  func(ctx context.Context, e event.DeleteEvent, q queue) { add(ctx, e.Object, q) },
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q queue) { add(ctx, e.Object, q) },
	}
}
