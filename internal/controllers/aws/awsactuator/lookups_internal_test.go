package awsactuator

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/cache"
)

// clockAt is a cache.Clock reading the time from a variable.
type clockAt struct{ now *time.Time }

func (c clockAt) Now() time.Time { return *c.now }

// The memo answers a repeated lookup within lookupTTL without a call, and calls again after
// it, after forget, for another input, and whenever the last answer was an error or empty.
func TestLookups(t *testing.T) {
	now := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	l := &lookups{cache: cache.NewLRUExpireCacheWithClock(lookupsSize, clockAt{&now})}
	calls := 0
	answer, fail := []string{"sg-1"}, error(nil)
	var hit bool
	look := func(in string) ([]string, error) {
		hit = false
		return remember(l, &hit, "DescribeSecurityGroups", map[string]string{"filter": in}, func() ([]string, error) {
			calls++
			return answer, fail
		}, func(ids []string) bool { return len(ids) > 0 })
	}
	step := func(what, in string, wantCalls int) {
		t.Helper()
		before := calls
		got, err := look(in)
		if calls != wantCalls {
			t.Errorf("%s: %d calls so far, want %d", what, calls, wantCalls)
		}
		if remembered := calls == before; hit != remembered {
			t.Errorf("%s: answered from the memo %v, reported %v", what, remembered, hit)
		}
		if fail == nil && (err != nil || len(got) != len(answer)) {
			t.Errorf("%s: answer %v, %v; want %v", what, got, err, answer)
		}
		if fail != nil && err == nil {
			t.Errorf("%s: no error", what)
		}
	}
	step("first", "a", 1)
	step("again", "a", 1)
	step("another input", "b", 2)
	now = now.Add(lookupTTL + time.Nanosecond)
	step("after the TTL", "a", 3)
	l.forget()
	step("after forget", "a", 4)

	l.forget()
	fail = errors.New("RequestLimitExceeded")
	step("an error", "a", 5)
	step("after an error", "a", 6)
	fail, answer = nil, nil
	step("empty", "a", 7)
	step("after an empty answer", "a", 8)
}
