package migration

import (
	"context"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// The migration controllers look at a resource only while it has a handover open: every
// other change of a Machine (its controllers' status writes, the sync's, NodeLink's) would
// otherwise cost a pass that finds nothing to do. In a fleet that is not migrating that is
// every change of every Machine; in bench migrate, where every Machine has a handover open,
// it changes nothing measurable.

// handoverOpen reports whether a pass has anything to do for a Machine API Machine or
// MachineSet: its requested authority is not its current one (Migrating included, and an
// authority not decided yet), or it is being deleted.
func handoverOpen(o client.Object) bool {
	var requested, current machinev1beta1.MachineAuthority
	switch v := o.(type) {
	case *machinev1beta1.Machine:
		requested, current = v.Spec.AuthoritativeAPI, v.Status.AuthoritativeAPI
	case *machinev1beta1.MachineSet:
		requested, current = v.Spec.AuthoritativeAPI, v.Status.AuthoritativeAPI
	default:
		return true
	}
	return requested != current || !o.GetDeletionTimestamp().IsZero()
}

// whileOpen passes an update of the Machine API copy on when the handover was open before
// it or is after it (the write that completes a handover is looked at once more, which
// forgets its pending-migration series); creations, deletions and generic events always.
func whileOpen() builder.Predicates { return builder.WithPredicates(openUpdates) }

var openUpdates = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	return handoverOpen(e.ObjectOld) || handoverOpen(e.ObjectNew)
}}

// whileNamesakeOpen passes a Cluster API object's events on (to pairwatch.ToMachineAPIKey)
// only when its Machine API namesake in ns, read from the cache as a newObj(), has a handover
// open. A copy the cache shows without one when the event comes is not missed: the write that
// opens a handover is itself an event of the Machine API copy, which passes whileOpen and
// reads both copies afresh.
func whileNamesakeOpen(c client.Reader, ns string, newObj func() client.Object) builder.Predicates {
	return builder.WithPredicates(namesakeOpen(c, ns, newObj))
}

func namesakeOpen(c client.Reader, ns string, newObj func() client.Object) predicate.Funcs {
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		m := newObj()
		return c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: o.GetName()}, m) == nil && handoverOpen(m)
	})
}
