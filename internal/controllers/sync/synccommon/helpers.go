package synccommon

import (
	"context"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// RequeueOnConflict turns an optimistic-lock conflict into a quiet requeue: the reconcile
// worked from a stale copy and must run again, even if no newer event is on its way.
func RequeueOnConflict(res ctrl.Result, err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) {
		return ctrl.Result{Requeue: true}, nil
	}
	return res, err
}

// MergeMap sets every key of from in into (creating it if needed). Keys only in into stay:
// other controllers may own them.
func MergeMap(into, from map[string]string) map[string]string {
	if len(from) == 0 {
		return into
	}
	if into == nil {
		into = map[string]string{}
	}
	for k, v := range from {
		into[k] = v
	}
	return into
}

// Release removes the sync finalizer, and the given finalizers no controller will remove any
// more, from o.
func Release(ctx context.Context, c client.Client, o client.Object, others ...string) error {
	base := o.DeepCopyObject().(client.Object)
	changed := controllerutil.RemoveFinalizer(o, SyncFinalizer)
	for _, f := range others {
		changed = controllerutil.RemoveFinalizer(o, f) || changed
	}
	if !changed {
		return nil
	}
	err := c.Patch(ctx, o, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsNotFound(err) {
		return nil
	}
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
