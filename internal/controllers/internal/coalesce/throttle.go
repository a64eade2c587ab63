package coalesce

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/patch"
)

// StatusThrottle spaces the status writes of each object that only change counts or
// messages at least Interval apart; other status changes go out at once. The zero value
// needs Interval set.
type StatusThrottle struct {
	Interval time.Duration

	mu   sync.Mutex
	last map[types.NamespacedName]time.Time
}

// Hold says how long to hold back key's status write: changed is whether the status
// changed at all, minor whether only counts or messages did.
func (t *StatusThrottle) Hold(key types.NamespacedName, changed, minor bool) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !changed {
		return 0
	}
	if t.last == nil {
		t.last = map[types.NamespacedName]time.Time{}
	}
	now := time.Now()
	if last, ok := t.last[key]; ok && minor && now.Sub(last) < t.Interval {
		return t.Interval - now.Sub(last)
	}
	t.last[key] = now
	return 0
}

// Forget drops what the throttle knows of key (its object is gone).
func (t *StatusThrottle) Forget(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.last, key)
}

// Finish persists obj with helper at the end of a reconcile, leaving its status out when
// the throttle holds it back, and then requeues no later than the hold ends.
func (t *StatusThrottle) Finish(ctx context.Context, helper *patch.Helper, obj client.Object, changed, minor bool,
	res *ctrl.Result, retErr *error) {
	var opts []patch.Option
	if wait := t.Hold(client.ObjectKeyFromObject(obj), changed, minor); wait > 0 {
		opts = append(opts, patch.SkipStatus)
		if res.RequeueAfter == 0 || wait < res.RequeueAfter {
			res.RequeueAfter = wait
		}
	}
	helper.Finish(ctx, obj, res, retErr, opts...)
}
