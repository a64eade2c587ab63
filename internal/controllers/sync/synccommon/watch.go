package synccommon

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	return handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: o.GetName()}}}
	})
}
