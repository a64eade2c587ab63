package authority

import (
	"context"
	"fmt"
	"slices"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/patch"
)

// ProviderPausedAnnotation is an operator's acknowledgement, on a paused InfraMachine whose
// provider reports no Paused condition (CAPO v0.13, CAPG v1.13), that the provider's
// controller is not acting on it: a handover to the Machine API then takes the pause as
// acknowledged (docs/migration.md). It answers one pause: pausing and unpausing remove it, so
// one set before the pause, or left from an earlier one, acknowledges nothing.
const ProviderPausedAnnotation = MachinaDomain + "provider-paused"

// SetPaused adds or removes the Cluster API paused annotation, reporting a change. Either
// change removes an operator's ProviderPausedAnnotation, as does finding o unpaused with one.
func SetPaused(o client.Object, paused bool) bool {
	a := o.GetAnnotations()
	_, has := a[clusterv1.PausedAnnotation]
	_, acked := a[ProviderPausedAnnotation]
	if has == paused && (paused || !acked) {
		return false
	}
	delete(a, ProviderPausedAnnotation)
	if paused {
		if a == nil {
			a = map[string]string{}
		}
		a[clusterv1.PausedAnnotation] = ""
	} else {
		delete(a, clusterv1.PausedAnnotation)
	}
	o.SetAnnotations(a)
	return true
}

// Pause is what a sync pass does with the paused annotation of the copies it writes.
type Pause int

const (
	// PauseMirror pauses the written copies: they mirror the authoritative side.
	PauseMirror Pause = iota
	// Unpause leaves the written copies active: they are the authoritative side (a resource
	// born Cluster API-authoritative, whose Cluster API copy the sync creates).
	Unpause
	// KeepPause leaves the annotation as it is (new copies are created paused): a migration
	// is under way and the migration controller pauses and unpauses each side.
	KeepPause
)

// Apply sets o's paused annotation as p says, reporting a change.
func (p Pause) Apply(o client.Object) bool {
	switch p {
	case PauseMirror:
		return SetPaused(o, true)
	case Unpause:
		return SetPaused(o, false)
	}
	return false
}

// ForCreate is the paused state a new copy gets.
func (p Pause) ForCreate() bool { return p != Unpause }

// StorePaused sets or clears the paused annotation on o and, when finalizer is not empty,
// adds it in the same locked write. An object being deleted is not unpaused (its controller
// would act on the deletion, which the sync settles first): that is an error. A gone object
// is nothing to do.
func StorePaused(ctx context.Context, c client.Client, o client.Object, paused bool, finalizer string) error {
	if !paused && !o.GetDeletionTimestamp().IsZero() {
		return fmt.Errorf("not unpausing %s %s/%s: it is being deleted", kindOf(o), o.GetNamespace(), o.GetName())
	}
	_, err := patch.Locked(ctx, c, o, func() bool {
		changed := SetPaused(o, paused)
		if finalizer != "" {
			changed = controllerutil.AddFinalizer(o, finalizer) || changed
		}
		return changed
	})
	return client.IgnoreNotFound(err)
}

// ProviderGuard is the finalizer an infrastructure object whose provider sets one of
// finalizers is given when it is unpaused: the first of them, unless it carries one already
// ("" then, or when the provider sets none).
func ProviderGuard(o client.Object, finalizers []string) string {
	if len(finalizers) == 0 || slices.ContainsFunc(finalizers, func(f string) bool { return controllerutil.ContainsFinalizer(o, f) }) {
		return ""
	}
	return finalizers[0]
}

// kindOf names o's kind for a message: its GroupVersionKind's, else its Go type.
func kindOf(o client.Object) string {
	if k := o.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	return fmt.Sprintf("%T", o)
}
