package requeue_test

import (
	"testing"
	"time"

	"github.com/machina-dev/machina/internal/requeue"
)

func TestAfter(t *testing.T) {
	for _, tc := range []struct{ d, def, want time.Duration }{
		{0, time.Minute, time.Minute},
		{-time.Second, time.Minute, time.Minute},
		{2 * time.Second, time.Minute, 2 * time.Second},
	} {
		if got := requeue.After(tc.d, tc.def); got != tc.want {
			t.Errorf("After(%v, %v) = %v, want %v", tc.d, tc.def, got, tc.want)
		}
	}
}

// Jittered stays within [period, period*1.2] and does spread: over many draws it does not
// always return the same value.
func TestJittered(t *testing.T) {
	for _, tc := range []struct{ d, def, base time.Duration }{
		{0, time.Minute, time.Minute},
		{-time.Second, 10 * time.Second, 10 * time.Second},
		{2 * time.Second, time.Minute, 2 * time.Second},
	} {
		seen := map[time.Duration]bool{}
		for range 200 {
			got := requeue.Jittered(tc.d, tc.def)
			if got < tc.base || got > tc.base+tc.base/5 {
				t.Fatalf("Jittered(%v, %v) = %v, outside [%v, %v]", tc.d, tc.def, got, tc.base, tc.base+tc.base/5)
			}
			seen[got] = true
		}
		if len(seen) < 2 {
			t.Errorf("Jittered(%v, %v) never varied: %v", tc.d, tc.def, seen)
		}
	}
	if got := requeue.Jittered(0, 0); got != 0 {
		t.Errorf("Jittered(0, 0) = %v, want 0", got)
	}
}
