package requeue_test

import (
	"slices"
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

// A patient wait asks again after 100 ms, doubling to 5 s, and then every 5 s without end.
func TestPatient(t *testing.T) {
	b := requeue.Patient()
	var got []time.Duration
	for range 9 {
		got = append(got, b.Step())
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
		1600 * time.Millisecond, 3200 * time.Millisecond, 5 * time.Second, 5 * time.Second, 5 * time.Second}
	if !slices.Equal(got, want) {
		t.Fatalf("delays %v, want %v", got, want)
	}
	for range 1000 {
		if d := b.Step(); d != 5*time.Second {
			t.Fatalf("a later delay is %v, want 5s for as long as the wait lasts", d)
		}
	}
}

// Spread keeps the period while the fleet's looks stay under the rate, and lengthens it to
// fleet/rate beyond; Fleet counts each key once until it is gone.
func TestSpread(t *testing.T) {
	for _, tc := range []struct {
		d, def time.Duration
		n      int
		rate   float64
		base   time.Duration
	}{
		{0, time.Minute, 0, 5, time.Minute},
		{0, time.Minute, 300, 5, time.Minute},
		{0, time.Minute, 1000, 5, 200 * time.Second},
		{0, time.Minute, 5000, 5, 1000 * time.Second},
		{2 * time.Second, time.Minute, 5, 5, 2 * time.Second},
		{2 * time.Second, time.Minute, 5000, 0, 2 * time.Second},
	} {
		for range 50 {
			if got := requeue.Spread(tc.d, tc.def, tc.n, tc.rate); got < tc.base || got > tc.base+tc.base/5 {
				t.Fatalf("Spread(%v, %v, %d, %v) = %v, outside [%v, %v]", tc.d, tc.def, tc.n, tc.rate, got, tc.base, tc.base+tc.base/5)
			}
		}
	}
	var f requeue.Fleet
	for _, k := range []string{"a", "b", "a", "c"} {
		f.Seen(k)
	}
	f.Gone("b")
	f.Gone("b")
	f.Gone("z")
	if f.Len() != 2 {
		t.Errorf("fleet of %d, want 2 (a and c)", f.Len())
	}
}
