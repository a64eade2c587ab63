package external

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/external/externaltest"
)

// Watcher.Get watches the kind, then reads from the cache; what the cache does not hold yet
// (an InfraMachine created a moment ago) is read from the API server, not reported missing.
func TestWatcherGetReadsTheCacheThenTheAPIServer(t *testing.T) {
	ctx := context.Background()
	kit := externaltest.New(t)
	object := externaltest.Object
	res := &Resolver{Reader: kit.Store(kit.CRD), Mapper: kit.Mapper}
	cached := kit.Store(object("old"))
	live := &externaltest.CountingReader{Reader: kit.Store(object("old"), object("new"))}
	ctl := &watchCounter{}
	w := &Watcher{Controller: ctl, Cache: readerCache{r: cached}}
	ref := externaltest.Ref
	for i, name := range []string{"old", "new"} {
		o, err := w.Get(ctx, res, live, ref(name), "ns", false)
		if err != nil || o.GetName() != name || o.Contract != ContractV1Beta2 {
			t.Fatalf("Get %s: %v, %v", name, o, err)
		}
		if live.Gets != i {
			t.Errorf("after reading %s: %d reads from the API server, want %d", name, live.Gets, i)
		}
	}
	if _, err := w.Get(ctx, res, live, ref("gone"), "ns", false); err == nil {
		t.Fatal("Get of an object neither the cache nor the API server has: no error")
	}
	if _, err := w.Get(ctx, res, live, ref("old"), "ns", true); err != nil || live.Gets != 3 {
		t.Errorf("a fresh Get: %v, %d reads from the API server in all, want 3", err, live.Gets)
	}
	if ctl.watches != 1 {
		t.Errorf("%d watches started for one kind, want 1", ctl.watches)
	}
}

// watchCounter is a controller that counts the watches it is given.
type watchCounter struct {
	controller.Controller
	watches int
}

func (c *watchCounter) Watch(source.Source) error {
	c.watches++
	return nil
}

// readerCache is a cache whose reads go to a client.
type readerCache struct {
	cache.Cache
	r client.Reader
}

func (c readerCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.r.Get(ctx, key, obj, opts...)
}
