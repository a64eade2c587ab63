package patch

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Locked applies mutate to obj and, when mutate reports a change, stores it with a merge
// patch of metadata and spec that carries obj's resourceVersion: if somebody changed the
// object since it was read, the patch fails with a conflict instead of overwriting them.
// It reports whether it wrote; obj then holds the server's answer. On an error obj keeps
// the change: read it again before trying once more.
func Locked(ctx context.Context, c client.Client, obj client.Object, mutate func() bool) (bool, error) {
	base := obj.DeepCopyObject().(client.Object)
	if !mutate() {
		return false, nil
	}
	return store(ctx, c, obj, base, false)
}

// LockedStatus is Locked for the status subresource.
func LockedStatus(ctx context.Context, c client.Client, obj client.Object, mutate func() bool) (bool, error) {
	base := obj.DeepCopyObject().(client.Object)
	if !mutate() {
		return false, nil
	}
	return store(ctx, c, obj, base, true)
}

// Store writes obj's differences from base (the object as read) as a merge patch of metadata
// and spec carrying base's resourceVersion. Nothing is written when the two are the same in
// JSON, which Go equality does not always see (the same providerSpec marshalled with its
// keys in another order, a time with nanoseconds that the API stores in seconds).
func Store(ctx context.Context, c client.Client, obj, base client.Object) error {
	_, err := store(ctx, c, obj, base, false)
	return err
}

// StoreStatus is Store for the status subresource.
func StoreStatus(ctx context.Context, c client.Client, obj, base client.Object) error {
	_, err := store(ctx, c, obj, base, true)
	return err
}

func store(ctx context.Context, c client.Client, obj, base client.Object, status bool) (bool, error) {
	data, err := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}).Data(obj)
	if err != nil {
		return false, err
	}
	if empty, err := lockOnly(data); empty || err != nil {
		return false, err
	}
	rec, key, recorded := recordOf(c, base) // superseded.go
	if recorded {
		if err := rec.outdated(key, base.GetResourceVersion()); err != nil {
			return false, err
		}
	}
	p := client.RawPatch(types.MergePatchType, data)
	if status {
		err = c.Status().Patch(ctx, obj, p)
	} else {
		err = c.Patch(ctx, obj, p)
	}
	if err == nil && recorded {
		rec.replaced(key, base.GetResourceVersion(), obj.GetResourceVersion())
	}
	return true, err
}

// lockOnly reports whether a locked merge patch changes nothing: all it holds is the
// resourceVersion that makes it conditional.
func lockOnly(data []byte) (bool, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil || len(top) != 1 || top["metadata"] == nil {
		return false, err
	}
	var metadata map[string]json.RawMessage
	if err := json.Unmarshal(top["metadata"], &metadata); err != nil {
		return false, err
	}
	_, locked := metadata["resourceVersion"]
	return locked && len(metadata) == 1, nil
}

// EnsureFinalizer adds finalizer to obj and stores it with an optimistic lock (Locked),
// reporting whether it wrote. An object being deleted gets no new finalizer: the API server
// refuses them, and nothing should start on such an object anyway. For the object a
// reconcile is about, use Helper.EnsureFinalizer instead, which keeps the Helper's
// snapshot true.
func EnsureFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string) (bool, error) {
	if !obj.GetDeletionTimestamp().IsZero() {
		return false, nil
	}
	wrote, err := Locked(ctx, c, obj, func() bool { return controllerutil.AddFinalizer(obj, finalizer) })
	if err != nil {
		return false, fmt.Errorf("adding finalizer %s to %s: %w", finalizer, obj.GetName(), err)
	}
	return wrote, nil
}

// RemoveFinalizer removes the finalizers from obj and stores that with an optimistic lock
// (Locked), reporting whether it wrote. An object that is gone already has none left: that
// is no error.
func RemoveFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizers ...string) (bool, error) {
	wrote, err := Locked(ctx, c, obj, func() bool {
		changed := false
		for _, f := range finalizers {
			changed = controllerutil.RemoveFinalizer(obj, f) || changed
		}
		return changed
	})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("removing finalizers %v from %s: %w", finalizers, obj.GetName(), err)
	}
	return wrote, nil
}
