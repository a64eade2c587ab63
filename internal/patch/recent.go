package patch

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// recentWrites remembers the last locked patch each object (and its status) was given, so
// that a pass working from a cache that has not yet seen that write does not send the very
// same patch again: it carries the same resourceVersion, so the API server could only refuse
// it with a conflict. Two passes in a row on one object are the common case — the first
// pass's own write, or the mirror it wrote, brings the object back at once — and the second
// pass often runs before the informer has delivered the first one's result.
//
// Nothing depends on it for correctness: forgotten (a restart, an entry aged out), the patch
// is sent and refused as before. A skipped patch changes nothing that was not already
// stored, and the write it repeats will reach the cache and bring the object back.
type recentWrites struct {
	mu      sync.Mutex
	entries map[recentKey]recentEntry
}

type recentKey struct {
	uid    types.UID
	status bool
}

type recentEntry struct {
	patch string
	at    time.Time
}

// recentTTL bounds how long a patch is remembered: far longer than an informer's lag, far
// shorter than anything that could make the same stale patch worth sending.
const recentTTL = time.Minute

var recent = &recentWrites{entries: map[recentKey]recentEntry{}}

// seen reports whether exactly this patch was stored for the object within recentTTL.
func (r *recentWrites) seen(uid types.UID, status bool, patch []byte, now time.Time) bool {
	if uid == "" {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[recentKey{uid, status}]
	return ok && e.patch == string(patch) && now.Sub(e.at) < recentTTL
}

// stored records a patch the API server accepted, dropping aged entries now and then.
func (r *recentWrites) stored(uid types.UID, status bool, patch []byte, now time.Time) {
	if uid == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.entries) >= 1024 {
		for k, e := range r.entries {
			if now.Sub(e.at) >= recentTTL {
				delete(r.entries, k)
			}
		}
	}
	r.entries[recentKey{uid, status}] = recentEntry{patch: string(patch), at: now}
}
