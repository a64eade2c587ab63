package manager_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/machina-dev/machina/internal/lab/labtest"
	mmgr "github.com/machina-dev/machina/internal/manager"
)

// Leader-election settings whose renew deadline plus retry period do not end before the lease
// are refused: a leader could still be writing when another takes over.
func TestLeaderElectionTimingRefused(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"} // never contacted: the check comes first
	for _, o := range []mmgr.Options{
		{LeaseDuration: 10 * time.Second, RenewDeadline: 9 * time.Second, RetryPeriod: time.Second},
		{LeaseDuration: 5 * time.Second},                               // default renew deadline 10 s
		{RenewDeadline: 2 * time.Second, RetryPeriod: 2 * time.Second}, // client-go's jitter
	} {
		o.MetricsAddr, o.HealthProbeAddr = "0", "0"
		if _, err := mmgr.New(cfg, o); err == nil || !strings.Contains(err.Error(), "leader election") {
			t.Errorf("lease %s, renew deadline %s, retry %s: %v, want refused", o.LeaseDuration, o.RenewDeadline, o.RetryPeriod, err)
		}
	}
}

// A leader whose Lease another identity takes stops: Start returns "leader election lost"
// within the renew deadline plus a retry period (and slack), its leader-elected runnables
// stop writing, and it leaves the other's Lease alone (its release on stop is only of its own).
func TestLeaderElectionLost(t *testing.T) {
	const ns, id = "machina-system", "machina-lost"
	const lease, renew, retryPeriod = 4 * time.Second, 2 * time.Second, 500 * time.Millisecond
	l := labtest.Start(t)
	c, err := client.New(l.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	var writes atomic.Int64
	mgr, err := mmgr.New(l.Config, mmgr.Options{MetricsAddr: "0", HealthProbeAddr: "0",
		LeaderElection: true, LeaderElectionNamespace: ns, LeaderElectionID: id,
		LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retryPeriod,
		Groups: []mmgr.Group{writerGroup(ns, &writes)}})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- mgr.Start(ctx) }()
	select {
	case <-mgr.Elected():
	case err := <-errc:
		t.Fatalf("manager stopped before it was elected: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("not elected within 60s")
	}
	waitFor(t, 30*time.Second, "the leader's writer writes", func() bool { return writes.Load() > 0 })

	taken := takeLease(ctx, t, c, client.ObjectKey{Namespace: ns, Name: id})
	limit := renew + retryPeriod + 3*time.Second
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "leader election lost") {
			t.Fatalf("manager stopped with %v, want leader election lost", err)
		}
		t.Logf("stopped %s after the Lease was taken (renew deadline %s, retry period %s)",
			time.Since(taken).Round(time.Millisecond), renew, retryPeriod)
	case <-time.After(limit):
		t.Fatalf("still running %s after its Lease was taken", limit)
	}
	assertNoWritesAfter(t, &writes, 2*retryPeriod)
	got := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: id}, got); err != nil {
		t.Fatal(err)
	}
	if h := ptr.Deref(got.Spec.HolderIdentity, ""); h != "usurper" {
		t.Errorf("Lease holder %q after the old leader stopped, want usurper", h)
	}
}

// writerGroup runs, on the leader only, a runnable that writes a ConfigMap every 50 ms,
// counting its successful writes.
func writerGroup(ns string, writes *atomic.Int64) mmgr.Group {
	return mmgr.Group{Name: "writer", Setup: func(mgr ctrl.Manager, _ mmgr.Env) error {
		return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "leader-writes", Namespace: ns}}
			for ctx.Err() == nil {
				base := cm.DeepCopy()
				cm.Data = map[string]string{"n": strconv.FormatInt(writes.Load()+1, 10)}
				err := mgr.GetClient().Patch(ctx, cm, client.Merge)
				if apierrors.IsNotFound(err) {
					err = mgr.GetClient().Create(ctx, cm)
				}
				if err == nil {
					writes.Add(1)
				} else {
					cm = base
				}
				select {
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
			return nil
		}))
	}}
}

// takeLease makes another identity the Lease's holder, as a replica that took it over after
// the holder's renewals failed would, and returns when.
func takeLease(ctx context.Context, t *testing.T, c client.Client, key client.ObjectKey) time.Time {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l := &coordinationv1.Lease{}
		if err := c.Get(ctx, key, l); err != nil {
			return err
		}
		now := metav1.NewMicroTime(time.Now())
		l.Spec.HolderIdentity = ptr.To("usurper")
		l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
		l.Spec.LeaseDurationSeconds = ptr.To[int32](60)
		l.Spec.LeaseTransitions = ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)
		return c.Update(ctx, l)
	})
	if err != nil {
		t.Fatalf("taking Lease %s: %v", key, err)
	}
	return time.Now()
}

// assertNoWritesAfter: once the manager returned, at most a write already in flight lands;
// watched for window.
func assertNoWritesAfter(t *testing.T, writes *atomic.Int64, window time.Duration) {
	t.Helper()
	at := writes.Load()
	time.Sleep(window) // an absence: nothing to wait on but time
	if n := writes.Load() - at; n > 1 {
		t.Errorf("%d writes after the manager stopped", n)
	}
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
