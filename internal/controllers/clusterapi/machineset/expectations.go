package machineset

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// expectationTTL bounds how long a MachineSet waits for its cache to show its own writes.
const expectationTTL = time.Minute

// expectations remember, per MachineSet, the Machines it created or deleted that its
// informer cache has not shown yet, so a reconcile working from a lagging cache neither
// creates nor deletes twice. They only save work: after a restart they are empty, and the
// caches are synced before the first reconcile.
type expectations struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*pending
}

type pending struct {
	creates map[string]bool // Machine names
	deletes map[string]bool
	at      time.Time
}

func newExpectations() *expectations {
	return &expectations{m: map[types.NamespacedName]*pending{}}
}

// expectCreate and expectDelete record a write about to be made.
func (e *expectations) expectCreate(key types.NamespacedName, name string) { e.add(key, name, true) }
func (e *expectations) expectDelete(key types.NamespacedName, name string) { e.add(key, name, false) }

func (e *expectations) add(key types.NamespacedName, name string, create bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.m[key]
	if !ok {
		p = &pending{creates: map[string]bool{}, deletes: map[string]bool{}}
		e.m[key] = p
	}
	p.at = time.Now()
	if create {
		p.creates[name] = true
	} else {
		p.deletes[name] = true
	}
}

// observeCreate and observeDelete count an event seen by the cache; a failed write is
// forgotten the same way.
func (e *expectations) observeCreate(key types.NamespacedName, name string) { e.done(key, name, true) }
func (e *expectations) observeDelete(key types.NamespacedName, name string) { e.done(key, name, false) }

func (e *expectations) done(key types.NamespacedName, name string, create bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.m[key]; ok {
		if create {
			delete(p.creates, name)
		} else {
			delete(p.deletes, name)
		}
	}
}

// satisfied reports whether the cache has caught up with every write of the MachineSet.
func (e *expectations) satisfied(key types.NamespacedName) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.m[key]
	if !ok {
		return true
	}
	if (len(p.creates) == 0 && len(p.deletes) == 0) || time.Since(p.at) > expectationTTL {
		delete(e.m, key)
		return true
	}
	return false
}

func (e *expectations) forget(key types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}
