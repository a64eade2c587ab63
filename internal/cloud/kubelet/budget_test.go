package kubelet

import (
	"testing"
	"time"
)

// The budget keeps every Lease renewed on time however many Nodes the one Kubelet serves.
func TestBudgetGrowsWithNodes(t *testing.T) {
	for _, c := range []struct {
		nodes   int
		renew   time.Duration
		wantQPS float32
	}{
		{nodes: 10, renew: 2 * time.Second, wantQPS: 200},    // the base
		{nodes: 1000, renew: 2 * time.Second, wantQPS: 1000}, // 500 renewals a second, twice that
		{nodes: 3000, renew: 10 * time.Second, wantQPS: 600},
		{nodes: 500, renew: 10 * time.Second, wantQPS: 200},
	} {
		qps, burst := budgetFor(200, c.nodes, c.renew)
		if qps != c.wantQPS || burst != int(2*c.wantQPS) {
			t.Errorf("%d Nodes renewing every %s: budget %v/s burst %d, want %v/s burst %d", c.nodes, c.renew, qps, burst, c.wantQPS, int(2*c.wantQPS))
		}
	}
	b := newBudget(200, 400)
	b.size(200, 1000, 2*time.Second)
	if b.QPS() != 1000 || b.Burst() != 2000 {
		t.Errorf("sized for 1000 Nodes: %v/s burst %d", b.QPS(), b.Burst())
	}
	b.size(200, 0, 2*time.Second)
	if b.QPS() != 200 {
		t.Errorf("sized for no Node: %v/s", b.QPS())
	}
}

// A sweep the cloud asks for waits at least 100 ms after the last, longer after a slow sweep
// (50 times its length), never more than a second.
func TestTriggeredGap(t *testing.T) {
	for _, c := range []struct{ took, want time.Duration }{
		{0, 100 * time.Millisecond},
		{time.Millisecond, 100 * time.Millisecond},
		{4 * time.Millisecond, 200 * time.Millisecond},
		{10 * time.Millisecond, 500 * time.Millisecond},
		{time.Second, time.Second},
	} {
		if got := triggeredGap(c.took); got != c.want {
			t.Errorf("after a sweep of %v: gap %v, want %v", c.took, got, c.want)
		}
	}
}
