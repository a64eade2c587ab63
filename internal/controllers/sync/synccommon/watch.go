package synccommon

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/machina-dev/machina/internal/provider"
)

// InNamespace limits a watch to one namespace: each API's copies live in their own.
func InNamespace(ns string) builder.Predicates {
	return builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == ns }))
}

// ToMachineAPIKey maps an object to the request of its Machine API namesake in ns: the sync
// and migration controllers key every pair of copies by the Machine API copy.
func ToMachineAPIKey(ns string) handler.EventHandler {
	return DeletingFirst(handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: o.GetName()}}}
	}))
}

// InstalledKinds returns the kinds among gvks whose CRDs the apiserver serves. A platform's
// kinds are watched only where its provider's CRDs are installed: a cluster on AWS has no
// simulated provider CRDs, and a watch of a missing kind would stop the manager from starting.
func InstalledKinds(mapper meta.RESTMapper, gvks ...schema.GroupVersionKind) ([]schema.GroupVersionKind, error) {
	var out []schema.GroupVersionKind
	for _, gvk := range gvks {
		_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		switch {
		case err == nil:
			out = append(out, gvk)
		case !meta.IsNoMatchError(err):
			return nil, fmt.Errorf("looking up %s: %w", gvk, err)
		}
	}
	return out, nil
}

// WatchInfra adds a metadata-only watch, mapped by h, of each registered platform's kind that
// kindOf picks and the apiserver serves, in namespace ns.
func WatchInfra(b *builder.Builder, mapper meta.RESTMapper, reg *provider.Registry, kindOf func(provider.Provider) schema.GroupVersionKind,
	h handler.EventHandler, ns string) (*builder.Builder, error) {
	var gvks []schema.GroupVersionKind
	for _, p := range reg.All() {
		gvks = append(gvks, kindOf(p))
	}
	installed, err := InstalledKinds(mapper, gvks...)
	if err != nil {
		return nil, err
	}
	for _, gvk := range installed {
		b = b.WatchesMetadata(Metadata(gvk), h, InNamespace(ns))
	}
	return b, nil
}

// Metadata returns an empty metadata-only object of kind gvk, for watches, reads and patches
// of provider objects whose Go types the core does not use.
func Metadata(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	return m
}

// MetadataList returns an empty metadata-only list of kind gvk.
func MetadataList(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	return l
}

// DeletingFirst passes events on to h, except that an object already being deleted when the
// controller starts keeps the priority of a new event: controller-runtime queues the objects
// of its first list behind every new event, and after a restart (a crash while a deletion
// was in flight) a Machine waiting for the sync or migration to let it go would otherwise
// wait for every other pair to be looked at first.
func DeletingFirst(h handler.EventHandler) handler.EventHandler { return deletingFirst{h} }

// deletingFirst is a type of its own, not a handler.Funcs: Funcs lowers the priority of
// everything of the first list before the function sees the event.
type deletingFirst struct{ handler.EventHandler }

func (d deletingFirst) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if e.Object != nil && !e.Object.GetDeletionTimestamp().IsZero() {
		e.IsInInitialList = false
	}
	d.EventHandler.Create(ctx, e, q)
}

// EnqueueSelf is the handler of a controller's own kind, with DeletingFirst.
func EnqueueSelf() handler.EventHandler {
	return DeletingFirst(&handler.EnqueueRequestForObject{})
}
