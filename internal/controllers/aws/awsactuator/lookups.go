package awsactuator

import (
	"encoding/json"
	"time"

	"golang.org/x/sync/singleflight"
	"k8s.io/apimachinery/pkg/util/cache"
)

// lookupTTL is how long a lookup's answer is reused by other Machines of the same region and
// credentials.
const lookupTTL = 30 * time.Second

// lookupsSize bounds the answers kept per region and credentials (distinct filter sets).
const lookupsSize = 256

// lookups remember, for one region and credentials (one per clients), the answers of the
// Describe calls that turn a providerSpec's AMI, subnet and security-group references into
// IDs. A MachineSet's Machines share those references: without the memo a scale-up made four
// of these calls per Machine (mapi-scale -platform aws), all counted against the account's
// EC2 request rate. Concurrent lookups of the same request make one call. Only answers that
// found something are kept, never errors or empty answers (a user fixing a reference sees the
// fix on the next attempt); a launch EC2 refuses for a providerSpec some of whose references
// the memo answered forgets them all and is tried once more with fresh lookups
// (Actuator.launch), so a resource replaced within the TTL never fails a Machine. Nothing
// depends on the memo: it starts empty.
type lookups struct {
	flight singleflight.Group
	cache  *cache.LRUExpireCache
}

func newLookups() *lookups { return &lookups{cache: cache.NewLRUExpireCache(lookupsSize)} }

// remember answers op with input in from the memo when it is younger than lookupTTL (and
// sets *hit), else from fetch, keeping fetch's answer when found says it found something.
func remember[T any](l *lookups, hit *bool, op string, in any, fetch func() (T, error), found func(T) bool) (T, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return fetch()
	}
	key := op + " " + string(b)
	if v, ok := l.cache.Get(key); ok {
		*hit = true
		return v.(T), nil
	}
	v, err, _ := l.flight.Do(key, func() (any, error) {
		out, err := fetch()
		if err == nil && found(out) {
			l.cache.Add(key, out, lookupTTL)
		}
		return out, err
	})
	out, _ := v.(T)
	return out, err
}

// forget drops every answer.
func (l *lookups) forget() { l.cache.RemoveAll(func(any) bool { return true }) }
