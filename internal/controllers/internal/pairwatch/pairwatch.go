// Package pairwatch is how the sync and migration controllers watch a pair of copies: each
// API's copies in their own namespace, every event keyed by the Machine API copy, and an
// object already being deleted at a restart taken first.
package pairwatch

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
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
