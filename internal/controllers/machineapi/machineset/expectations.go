package machineset

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// expectationTTL bounds how long a MachineSet waits for its cache to show its own writes,
// counted from the last one it saw: a scale-up of thousands takes minutes to write, and the
// expectations must not lapse while the writes are still arriving (the next pass, working
// from a cache a few seconds behind, would create Machines beyond spec.replicas and then
// delete them).
const expectationTTL = time.Minute

// expectations remember how many Machine creations and deletions a MachineSet is waiting to
// see in its informer cache, so a reconcile working from a cache that lags behind its own
// writes does not create or delete again. They are an optimisation only: after a restart
// they are empty, and the manager's caches are fully synced before any reconcile, so
// correctness never depends on them.
type expectations struct {
	mu  sync.Mutex
	m   map[types.NamespacedName]*expected
	now func() time.Time
}

type expected struct {
	adds, dels int
	// at is when the expectation was set or last moved.
	at       time.Time
	deleting map[types.UID]bool
}

func newExpectations() *expectations {
	return &expectations{m: map[types.NamespacedName]*expected{}, now: time.Now}
}

func (e *expectations) expect(key types.NamespacedName, adds, dels int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m[key] = &expected{adds: adds, dels: dels, at: e.now(), deleting: map[types.UID]bool{}}
}

func (e *expectations) satisfied(key types.NamespacedName) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.m[key]
	if !ok {
		return true
	}
	if (x.adds <= 0 && x.dels <= 0) || e.now().Sub(x.at) > expectationTTL {
		delete(e.m, key)
		return true
	}
	return false
}

// observeCreate counts a Machine's creation event.
func (e *expectations) observeCreate(key types.NamespacedName) { e.lower(key, true) }

// observeDelete counts a Machine's deletion (its deletion timestamp, or its removal), once
// per Machine.
func (e *expectations) observeDelete(key types.NamespacedName, o client.Object) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.m[key]; ok && !x.deleting[o.GetUID()] {
		x.deleting[o.GetUID()] = true
		x.dels--
		x.at = e.now()
	}
}

func (e *expectations) observeFailedCreate(key types.NamespacedName) { e.lower(key, true) }
func (e *expectations) observeFailedDelete(key types.NamespacedName) { e.lower(key, false) }

func (e *expectations) lower(key types.NamespacedName, add bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.m[key]; ok {
		if add {
			x.adds--
		} else {
			x.dels--
		}
		x.at = e.now()
	}
}

func (e *expectations) forget(key types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}
