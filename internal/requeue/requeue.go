// Package requeue says when a controller looks again, without an event, at an object it has
// settled: every controller is given a resync period (manager.Env.Resync, shortened by
// tests) and falls back to its own default when none is set; one whose look is a cloud call
// spreads its fleet's looks (Spread, Fleet). Patient spaces a wait for an answer the API
// server owes.
package requeue

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// After returns the resync period d a controller was given, or its default def when d is not
// positive.
func After(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Jittered returns After(d, def) plus up to a fifth more, drawn at random, so that objects
// created together (a MachineSet's Machines) do not all resync at the same moment.
func Jittered(d, def time.Duration) time.Duration { return Spread(d, def, 0, 0) }

// Patient is the spacing of a wait for an answer the API server is expected to give soon (a
// CRD being installed, a server restarting): 100 ms, doubling up to 5 s, then every 5 s for as
// long as the caller's context lasts.
func Patient() wait.Backoff {
	return wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Cap: 5 * time.Second, Steps: math.MaxInt32}
}

// Spread returns Jittered(d, def), lengthened when a fleet of n objects, each looked at
// once a period, would make more than perSecond looks a second: then the period is
// n/perSecond, plus the same jitter. A look that is a cloud call counts against the
// account's rate limit (EC2 refills its bucket for all describe calls by 20 a second), so
// a fleet's resyncs must not grow with it without bound.
func Spread(d, def time.Duration, n int, perSecond float64) time.Duration {
	p := After(d, def)
	if perSecond > 0 {
		p = max(p, time.Duration(float64(n)/perSecond*float64(time.Second)))
	}
	if p <= 0 {
		return p
	}
	return p + time.Duration(rand.Int64N(int64(p/5)+1))
}

// CloudLooks is the most resync looks a second a controller whose look is a cloud call makes
// across its fleet, with Spread: a minute's resync holds up to 300 objects, 5,000 resync
// every 17 minutes (machine-api-operator's providers every 10). EC2 refills an account's
// bucket for every describe call in a region by 20 a second; a minute's resync at 5,000
// Machines was 83 a second.
const CloudLooks = 5.0

// Fleet counts the objects a controller resyncs: Seen by each pass that plans a resync,
// Gone when the object is. In memory only; a new leader counts anew as its passes come.
type Fleet struct {
	seen sync.Map
	n    atomic.Int64
}

// Seen counts key, once.
func (f *Fleet) Seen(key any) {
	if _, loaded := f.seen.LoadOrStore(key, struct{}{}); !loaded {
		f.n.Add(1)
	}
}

// Gone stops counting key.
func (f *Fleet) Gone(key any) {
	if _, loaded := f.seen.LoadAndDelete(key); loaded {
		f.n.Add(-1)
	}
}

// Len is how many objects are counted.
func (f *Fleet) Len() int { return int(f.n.Load()) }
