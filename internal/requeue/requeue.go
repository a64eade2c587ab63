// Package requeue says when a controller looks again, without an event, at an object it has
// settled: every controller is given a resync period (manager.Env.Resync, shortened by
// tests) and falls back to its own default when none is set. Patient spaces a wait for an
// answer the API server owes.
package requeue

import (
	"math"
	"math/rand/v2"
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
func Jittered(d, def time.Duration) time.Duration {
	p := After(d, def)
	if p <= 0 {
		return p
	}
	return p + time.Duration(rand.Int64N(int64(p/5)+1))
}

// Patient is the spacing of a wait for an answer the API server is expected to give soon (a
// CRD being installed, a server restarting): 100 ms, doubling up to 5 s, then every 5 s for as
// long as the caller's context lasts.
func Patient() wait.Backoff {
	return wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Cap: 5 * time.Second, Steps: math.MaxInt32}
}
