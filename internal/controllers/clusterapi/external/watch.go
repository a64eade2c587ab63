package external

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Watcher adds watches on provider kinds as a controller meets them, so a change to an
// InfraMachine (say) brings its owner back at once instead of at the next resync.
type Watcher struct {
	Controller controller.Controller
	Cache      cache.Cache
	// Handler maps a provider object to requests (usually EnqueueRequestForOwner).
	Handler handler.EventHandler

	mu      sync.Mutex
	watched map[schema.GroupVersionKind]bool
}

// Watch starts watching gvk unless it is watched already. It is safe to call on every
// reconcile.
func (w *Watcher) Watch(gvk schema.GroupVersionKind) error {
	if w == nil || w.Controller == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watched[gvk] {
		return nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := w.Controller.Watch(source.Kind[client.Object](w.Cache, u, w.Handler)); err != nil {
		return err
	}
	if w.watched == nil {
		w.watched = map[schema.GroupVersionKind]bool{}
	}
	w.watched[gvk] = true
	return nil
}

// Get resolves ref through res, watches its kind and reads the object from the cache the
// watch fills: a pass of its owner then costs no request. It reads through live instead when
// fresh is set (the owner is waiting on the object's next step, which a cache a moment behind
// would miss: a provider's steps come fast, and a pass working from the step before costs its
// owner a status write saying so) and when the cache does not hold the object (created a
// moment ago: a MachineSet creates a Machine's InfraMachine with the Machine, and the
// object's own events reach its owner only once it is owned). Without a controller (w nil) it
// reads through live. A write made from a stale copy must carry its resourceVersion
// (EnsureOwned does) so it fails rather than undo a newer one.
func (w *Watcher) Get(ctx context.Context, res *Resolver, live client.Reader, ref clusterv1.ContractVersionedObjectReference, namespace string, fresh bool) (*Object, error) {
	if w == nil || w.Controller == nil {
		return res.Get(ctx, live, ref, namespace)
	}
	resolved, err := res.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	if err := w.Watch(resolved.GVK); err != nil {
		return nil, err
	}
	key := client.ObjectKey{Namespace: namespace, Name: ref.Name}
	if fresh {
		return res.Read(ctx, live, resolved, key)
	}
	o, err := res.Read(ctx, w.Cache, resolved, key)
	if apierrors.IsNotFound(err) {
		return res.Read(ctx, live, resolved, key)
	}
	return o, err
}
