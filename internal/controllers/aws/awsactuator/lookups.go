package awsactuator

import (
	"encoding/json"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// lookupTTL is how long a lookup's answer is reused by other Machines of the same region and
// credentials.
const lookupTTL = 30 * time.Second

// lookups remember, for one region and credentials (one per clients), the answers of the
// Describe calls that turn a providerSpec's AMI, subnet and security-group references into
// IDs. A MachineSet's Machines share those references: without the memo a scale-up made four
// of these calls per Machine (mapi-scale -platform aws), all counted against the account's EC2
// request rate. Concurrent lookups of the same request make one call. Only answers that found
// something are kept, never errors or empty answers (a user fixing a reference sees the fix on
// the next attempt); a launch EC2 refuses for a providerSpec some of whose references the
// memo answered forgets them all and is tried once more with fresh lookups (Actuator.launch), so a resource replaced within the TTL
// never fails a Machine. Nothing depends on the memo: it starts empty.
type lookups struct {
	flight singleflight.Group
	now    func() time.Time

	mu sync.Mutex
	m  map[string]lookup
}

type lookup struct {
	at  time.Time
	val any
}

func newLookups() *lookups { return &lookups{now: time.Now, m: map[string]lookup{}} }

// remember answers op with input in from the memo when it is younger than lookupTTL (and
// sets *hit), else from fetch, keeping fetch's answer when found says it found something.
func remember[T any](l *lookups, hit *bool, op string, in any, fetch func() (T, error), found func(T) bool) (T, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return fetch()
	}
	key := op + " " + string(b)
	if v, ok := l.get(key); ok {
		*hit = true
		return v.(T), nil
	}
	v, err, _ := l.flight.Do(key, func() (any, error) {
		out, err := fetch()
		if err == nil && found(out) {
			l.put(key, out)
		}
		return out, err
	})
	out, _ := v.(T)
	return out, err
}

func (l *lookups) get(key string) (any, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.m[key]
	if !ok || l.now().Sub(e.at) >= lookupTTL {
		delete(l.m, key)
		return nil, false
	}
	return e.val, true
}

func (l *lookups) put(key string, v any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[key] = lookup{at: l.now(), val: v}
}

// forget drops every answer.
func (l *lookups) forget() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.m)
}
