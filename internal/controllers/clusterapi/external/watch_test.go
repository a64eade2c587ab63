package external

import (
	"context"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Watcher.Get watches the kind, then reads from the cache; what the cache does not hold yet
// (an InfraMachine created a moment ago) is read from the API server, not reported missing.
func TestWatcherGetReadsTheCacheThenTheAPIServer(t *testing.T) {
	ctx := context.Background()
	gvk := schema.GroupVersionKind{Group: "infrastructure.example.com", Version: "v1beta1", Kind: "FooMachine"}
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	object := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace("ns")
		u.SetName(name)
		return u
	}
	def := crd(map[string]string{"cluster.x-k8s.io/v1beta2": "v1beta1"}, "v1beta1")
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{gvk.GroupVersion()})
	mapper.Add(gvk, meta.RESTScopeNamespace)
	res := &Resolver{Reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(def).Build(), Mapper: mapper}
	cached := fake.NewClientBuilder().WithScheme(scheme).WithObjects(object("old")).Build()
	live := &countingReader{Reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(object("old"), object("new")).Build()}
	ctl := &watchCounter{}
	w := &Watcher{Controller: ctl, Cache: readerCache{r: cached}}
	ref := func(name string) clusterv1.ContractVersionedObjectReference {
		return clusterv1.ContractVersionedObjectReference{APIGroup: gvk.Group, Kind: gvk.Kind, Name: name}
	}
	for i, name := range []string{"old", "new"} {
		o, err := w.Get(ctx, res, live, ref(name), "ns", false)
		if err != nil || o.GetName() != name || o.Contract != ContractV1Beta2 {
			t.Fatalf("Get %s: %v, %v", name, o, err)
		}
		if live.gets != i {
			t.Errorf("after reading %s: %d reads from the API server, want %d", name, live.gets, i)
		}
	}
	if _, err := w.Get(ctx, res, live, ref("gone"), "ns", false); err == nil {
		t.Fatal("Get of an object neither the cache nor the API server has: no error")
	}
	if _, err := w.Get(ctx, res, live, ref("old"), "ns", true); err != nil || live.gets != 3 {
		t.Errorf("a fresh Get: %v, %d reads from the API server in all, want 3", err, live.gets)
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

type countingReader struct {
	client.Reader
	gets int
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets++
	return r.Reader.Get(ctx, key, obj, opts...)
}

// readerCache is a cache whose reads go to a client.
type readerCache struct {
	cache.Cache
	r client.Reader
}

func (c readerCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.r.Get(ctx, key, obj, opts...)
}
