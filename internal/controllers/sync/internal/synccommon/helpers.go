package synccommon

import (
	"context"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/patch"
)

// RequeueOnConflict turns an optimistic-lock conflict into a quiet requeue: the reconcile
// worked from a stale copy and must run again, even if no newer event is on its way.
func RequeueOnConflict(res ctrl.Result, err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: patch.ConflictRetry}, nil
	}
	return res, err
}

// Release removes the sync finalizer, and the given finalizers no controller will remove any
// more, from o.
func Release(ctx context.Context, c client.Client, o client.Object, others ...string) error {
	_, err := patch.RemoveFinalizer(ctx, c, o, append([]string{authority.SyncFinalizer}, others...)...)
	return err
}

// CopySpec sets dst's spec to src's (both the same Go type with a Spec field).
func CopySpec(src, dst client.Object) error {
	sv, dv := reflect.ValueOf(src).Elem().FieldByName("Spec"), reflect.ValueOf(dst).Elem().FieldByName("Spec")
	if !sv.IsValid() || !dv.IsValid() || sv.Type() != dv.Type() {
		return fmt.Errorf("cannot copy the spec of %T to %T", src, dst)
	}
	dv.Set(sv)
	return nil
}

// KeepProviderID puts back the spec.providerID that obj had in before when a copy of the
// other side's spec left it empty. A providerID is not a wish but a record: the instance a
// controller launched for the Machine. The side the spec comes from may not know it yet (an
// instance the Cluster API side launched while a handover from the Machine API had unpaused
// it, which the migration hands to the Machine API copy before letting the provider go), and
// clearing it would leave that instance running with no controller that knows it. obj and
// before are the same InfraMachine type, whose spec.providerID is a string or *string (the
// contract's field, typed per provider).
func KeepProviderID(obj, before client.Object) {
	field := func(o client.Object) reflect.Value {
		spec := reflect.ValueOf(o).Elem().FieldByName("Spec")
		if !spec.IsValid() {
			return reflect.Value{}
		}
		return spec.FieldByName("ProviderID")
	}
	now, was := field(obj), field(before)
	if !now.IsValid() || !was.IsValid() || now.Type() != was.Type() {
		return
	}
	switch now.Kind() {
	case reflect.String:
		if now.String() == "" {
			now.Set(was)
		}
	case reflect.Pointer:
		if now.IsNil() || now.Elem().Kind() == reflect.String && now.Elem().String() == "" {
			now.Set(was)
		}
	}
}
