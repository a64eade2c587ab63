package machineset

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// A scale-up that takes longer than the TTL to write keeps its expectations while its
// creations keep arriving; they lapse a TTL after the last one.
func TestExpectationsLastAsLongAsProgress(t *testing.T) {
	now := time.Unix(1000, 0)
	e := newExpectations()
	e.now = func() time.Time { return now }
	key := types.NamespacedName{Namespace: "ns", Name: "set"}
	e.expect(key, 3, 0)
	for i := range 2 {
		now = now.Add(50 * time.Second)
		e.observeCreate(key)
		if e.satisfied(key) {
			t.Fatalf("satisfied after %d of 3 creations, %s after the expectation was set", i+1, now.Sub(time.Unix(1000, 0)))
		}
	}
	now = now.Add(expectationTTL - time.Second)
	if e.satisfied(key) {
		t.Fatal("satisfied with one creation outstanding, within the TTL of the last one seen")
	}
	now = now.Add(2 * time.Second)
	if !e.satisfied(key) {
		t.Fatal("still waiting a TTL after the last creation was seen")
	}
	e.expect(key, 1, 0)
	e.observeCreate(key)
	if !e.satisfied(key) {
		t.Fatal("not satisfied once every creation was seen")
	}
}
