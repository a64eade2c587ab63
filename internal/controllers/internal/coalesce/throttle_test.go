package coalesce

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// A minor change right after a write is held for what is left of the interval; a major
// change, no change and a minor change once the interval passed are not; Forget starts over.
func TestStatusThrottleHold(t *testing.T) {
	th := StatusThrottle{Interval: 200 * time.Millisecond}
	key := types.NamespacedName{Namespace: "ns", Name: "a"}
	if d := th.Hold(key, true, true); d != 0 {
		t.Fatalf("first write held %s", d)
	}
	if d := th.Hold(key, true, true); d <= 0 || d > th.Interval {
		t.Errorf("minor change right after a write: held %s, want (0, %s]", d, th.Interval)
	}
	if d := th.Hold(key, true, false); d != 0 {
		t.Errorf("major change: held %s", d)
	}
	if d := th.Hold(key, false, true); d != 0 {
		t.Errorf("no change: held %s", d)
	}
	if d := th.Hold(types.NamespacedName{Namespace: "ns", Name: "b"}, true, true); d != 0 {
		t.Errorf("another object's first write held %s", d)
	}
	th.Forget(key)
	if d := th.Hold(key, true, true); d != 0 {
		t.Errorf("after Forget: held %s", d)
	}
	time.Sleep(th.Interval) // the interval itself is what is tested
	if d := th.Hold(key, true, true); d != 0 {
		t.Errorf("minor change after the interval: held %s", d)
	}
}
