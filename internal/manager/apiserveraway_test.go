package manager_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/lab/labtest"
	mmgr "github.com/machina-dev/machina/internal/manager"
)

// A manager set up while the API server cannot be reached waits for it instead of failing:
// its controllers' setup (here a field index, which looks the kind up) goes on once the API
// server answers, and the manager starts. Before, New returned "failed to get restmapping"
// and `machina manager` exited, to be restarted in CrashLoopBackOff.
func TestManagerSetUpWhileAPIServerAway(t *testing.T) {
	l := labtest.Start(t)
	u, err := url.Parse(l.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := lab.NewProxy(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	proxy.Cut(lab.Drop)

	indexed := mmgr.Group{Name: "indexer", Setup: func(mgr ctrl.Manager, _ mmgr.Env) error {
		return mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.ConfigMap{}, "data-size",
			func(o client.Object) []string { return []string{"n"} })
	}}
	type result struct {
		mgr ctrl.Manager
		err error
	}
	done := make(chan result, 1)
	go func() {
		mgr, err := mmgr.New(lab.ProxiedConfig(l.Config, proxy), mmgr.Options{MetricsAddr: "0", HealthProbeAddr: "0",
			Groups: []mmgr.Group{indexed}})
		done <- result{mgr, err}
	}()
	// Heal only once the setup has been refused a few times, and after client-go's own retries
	// of a refused request (10, a second apart) are spent.
	cutAt := time.Now()
	deadline := cutAt.Add(time.Minute)
	for proxy.Stats().Refused < 3 || time.Since(cutAt) < 20*time.Second {
		select {
		case r := <-done:
			t.Fatalf("New returned while the API server was unreachable: %v", r.err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the setup never tried to reach the API server")
		}
	}
	proxy.Heal()
	var r result
	select {
	case r = <-done:
	case <-time.After(mmgr.MappingPatience):
		t.Fatal("New did not return once the API server was back")
	}
	if r.err != nil {
		t.Fatalf("New after the API server came back: %v", r.err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- r.mgr.Start(ctx) }()
	synced, syncCancel := context.WithTimeout(ctx, time.Minute)
	defer syncCancel()
	if !r.mgr.GetCache().WaitForCacheSync(synced) {
		t.Fatal("the manager's caches did not sync")
	}
	var cms corev1.ConfigMapList
	if err := r.mgr.GetCache().List(ctx, &cms, client.MatchingFields{"data-size": "n"}); err != nil {
		t.Fatalf("listing by the index set up while the API server was away: %v", err)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("manager exit: %v", err)
	}
}
