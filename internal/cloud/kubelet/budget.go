package kubelet

import (
	"context"
	"time"

	"golang.org/x/time/rate"
)

// budget is the kubelet client's rate limiter (client-go's flowcontrol.RateLimiter). One
// Kubelet stands in for the kubelet of every Node, and each of those has a client budget of
// its own in a real cluster, so a fixed budget would starve the Leases once there are many
// Nodes: at a thousand Nodes renewing every 2 s a budget of 200 requests a second renews each
// Lease every 5 s, at three thousand every 15 s — past the grace period, and the node
// lifecycle controller marks healthy Nodes Unknown. The budget grows with the Nodes served
// (sized by sweep) so that every Lease is renewed on time; the apiserver's own limits then
// apply, as they would to real kubelets.
type budget struct{ *rate.Limiter }

func newBudget(qps float32, burst int) budget {
	return budget{rate.NewLimiter(rate.Limit(qps), burst)}
}

func (b budget) TryAccept() bool                { return b.Allow() }
func (b budget) Accept()                        { _ = b.Limiter.Wait(context.Background()) }
func (b budget) Wait(ctx context.Context) error { return b.Limiter.Wait(ctx) }
func (b budget) Stop()                          {}
func (b budget) QPS() float32                   { return float32(b.Limit()) }

// budgetFor is the budget for nodes Nodes renewing their Leases every renew: two requests
// per Node and renewal (the Lease, and status or pod work besides), never below base.
func budgetFor(base float32, nodes int, renew time.Duration) (qps float32, burst int) {
	qps = max(base, float32(2*float64(nodes)/renew.Seconds()))
	return qps, int(2 * qps)
}

// size sets the budget for nodes Nodes.
func (b budget) size(base float32, nodes int, renew time.Duration) {
	qps, burst := budgetFor(base, nodes, renew)
	if float32(b.Limit()) != qps {
		b.SetLimit(rate.Limit(qps))
		b.SetBurst(burst)
	}
}
