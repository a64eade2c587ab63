package manager

import (
	"fmt"
	"time"
)

// Leader election's timing (docs/install.md, "Leader election"). A candidate takes a Lease
// over once it has seen the Lease unrenewed for LeaseDuration, looking every RetryPeriod: when
// a leader dies without releasing its Lease, reconciling stalls for about LeaseDuration +
// RetryPeriod (a leader that stops cleanly releases it, and the handover takes about
// RetryPeriod). A leader retries its renewal every RetryPeriod and gives up RenewDeadline
// after the attempt began, so a leader cut off from the apiserver stops — its manager returns
// "leader election lost", and `machina manager` exits non-zero — at most RetryPeriod +
// RenewDeadline after its last renewal, while another replica can take over only
// LeaseDuration after it.
//
// The defaults keep that margin at 8 s of a 20 s Lease, ample for the last write in flight
// to land before a new leader starts, while a dead leader stalls reconciling for at most about
// 22 s; the leader rides out an apiserver unavailable for under 10 s. (controller-runtime's
// defaults, 15/10/2 s, leave 3 s.)
const (
	DefaultLeaseDuration = 20 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// leaderElectionTiming returns the Options' leader-election durations with the defaults
// applied, refusing a RenewDeadline + RetryPeriod that does not end before LeaseDuration: a
// leader could then still be writing when another replica takes over.
func (o Options) leaderElectionTiming() (lease, renew, retry time.Duration, err error) {
	lease, renew, retry = o.LeaseDuration, o.RenewDeadline, o.RetryPeriod
	if lease == 0 {
		lease = DefaultLeaseDuration
	}
	if renew == 0 {
		renew = DefaultRenewDeadline
	}
	if retry == 0 {
		retry = DefaultRetryPeriod
	}
	switch {
	case lease < 0 || renew < 0 || retry < 0:
		return 0, 0, 0, fmt.Errorf("leader election: negative duration (lease %s, renew deadline %s, retry period %s)", lease, renew, retry)
	case renew+retry >= lease:
		return 0, 0, 0, fmt.Errorf("leader election: renew deadline %s + retry period %s must be less than the lease duration %s, "+
			"or a leader that lost its Lease could still be writing when another takes over", renew, retry, lease)
	case float64(renew) <= 1.2*float64(retry):
		return 0, 0, 0, fmt.Errorf("leader election: renew deadline %s must exceed 1.2 × the retry period %s (client-go's jittered retries)", renew, retry)
	}
	return lease, renew, retry, nil
}
