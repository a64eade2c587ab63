package external

import (
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
