// Package patch persists what a reconcile changed in an object, with as few API writes as
// possible, and always with optimistic locking: every patch carries the resourceVersion the
// change was computed from, so a writer working from a stale copy never overwrites another
// writer's finalizers or conditions; it gets a conflict and runs again on fresh data.
//
// There is one way to do each thing:
//
//   - The object a reconcile is about: NewHelper right after reading it, and Finish in a
//     defer. Finish writes nothing when nothing changed, one patch for metadata and spec,
//     one for status.
//   - Its finalizer: Helper.EnsureFinalizer on the normal path, before the first action that
//     must not outlive the object (creating an instance, cloning a template). It stores the
//     finalizer at once and the pass carries on. Removing it is the last step of the
//     deletion path: controllerutil.RemoveFinalizer, stored by Finish.
//   - Any other object (a finalizer or label on an object the reconcile does not own, a
//     Node, a status condition on a child): EnsureFinalizer, RemoveFinalizer, or Locked and
//     LockedStatus, which write only when the change function reports a change.
//
// Options of Patch and Finish:
//
//   - SkipStatus applies when a pass must store metadata or spec before it may go on (a
//     finalizer, an annotation that records a decision) but its status is not final yet:
//     the status is kept for a later Patch of the same Helper, usually Finish. It also
//     applies to a pass that ends right after such a write and leaves the status to the
//     next pass, which would only overwrite it.
//   - OwnSpecChange applies when the pass computes the status for the spec it is itself
//     writing (a controller that sets spec.providerID, say): the observedGenerations of the
//     status move on with the generation the spec write produces, so the next pass does not
//     write the status again only to record that generation. Leave it out when the status
//     describes the object as read and the spec written has yet to be acted upon.
package patch

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Helper remembers an object as it was read.
type Helper struct {
	c      client.Client
	before client.Object
	// stale: a patch met a newer copy of the object; nothing more is written from this one.
	stale bool
}

// NewHelper snapshots obj; call it right after reading the object.
func NewHelper(obj client.Object, c client.Client) *Helper {
	return &Helper{c: c, before: obj.DeepCopyObject().(client.Object)}
}

// Option changes what Patch writes.
type Option int

const (
	// SkipStatus writes metadata and spec only; status changes wait for a later patch (or a
	// later reconcile that recomputes them). A reconcile that has to store a finalizer before
	// anything else uses it to save a write.
	SkipStatus Option = 1
	// OwnSpecChange says the status was computed for the spec the reconcile is writing: when
	// the metadata and spec patch moves metadata.generation on, every observedGeneration in
	// the status that named the generation the reconcile read is moved on with it. Without
	// it, the next reconcile would write the status once more only to record the generation
	// that the reconcile's own spec change (a providerID, say) produced. Optimistic locking
	// makes this sound: the patch succeeds only if nobody else changed the object meanwhile.
	OwnSpecChange Option = 2
)

// Patch writes the differences between the snapshot and obj. obj is updated with the
// server's answer (new resourceVersion) and keeps the status the reconcile wanted.
func (h *Helper) Patch(ctx context.Context, obj client.Object, opts ...Option) error {
	before, err := runtime.DefaultUnstructuredConverter.ToUnstructured(h.before)
	if err != nil {
		return err
	}
	after, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	beforeStatus, afterStatus := before["status"], after["status"]
	delete(before, "status")
	delete(after, "status")
	mainChanged := !equality.Semantic.DeepEqual(before, after)
	statusChanged := !equality.Semantic.DeepEqual(beforeStatus, afterStatus)
	skipStatus := slices.Contains(opts, SkipStatus)

	base := h.before
	if mainChanged {
		readGeneration := h.before.GetGeneration()
		desired := obj.DeepCopyObject().(client.Object)
		if err := Store(ctx, h.c, obj, base); err != nil {
			h.stale = h.stale || apierrors.IsConflict(err)
			return err
		}
		if gone(obj) {
			// The patch removed the last finalizer of an object being deleted: the API
			// server has deleted it, and a status patch would only meet NotFound.
			h.before = obj.DeepCopyObject().(client.Object)
			return nil
		}
		// The answer carries the stored status; the base of the status patch is the object
		// as it is now stored, and obj gets back the status the reconcile wants.
		base = obj.DeepCopyObject().(client.Object)
		if g := obj.GetGeneration(); slices.Contains(opts, OwnSpecChange) && g != readGeneration {
			advanced, err := advanceObservedGeneration(desired, base, readGeneration, g)
			if err != nil {
				return err
			}
			statusChanged = statusChanged || advanced
		}
		if err := copyStatus(desired, obj); err != nil {
			return err
		}
	}
	if statusChanged && !skipStatus {
		if err := StoreStatus(ctx, h.c, obj, base); err != nil {
			h.stale = h.stale || apierrors.IsConflict(err)
			return fmt.Errorf("status: %w", err)
		}
		base = obj
	}
	// The next patch compares with what is stored: a skipped status is still to be written.
	h.before = base.DeepCopyObject().(client.Object)
	return nil
}

// gone reports whether obj, as the API server answered a write of it, was deleted by that
// write: it is being deleted and has no finalizer left.
func gone(obj client.Object) bool {
	return !obj.GetDeletionTimestamp().IsZero() && len(obj.GetFinalizers()) == 0
}

// advanceObservedGeneration moves every observedGeneration in desired's status that is from
// generation to next, and reports whether the status then differs from stored's.
func advanceObservedGeneration(desired, stored client.Object, from, next int64) (bool, error) {
	d, err := runtime.DefaultUnstructuredConverter.ToUnstructured(desired)
	if err != nil {
		return false, err
	}
	s, err := runtime.DefaultUnstructuredConverter.ToUnstructured(stored)
	if err != nil {
		return false, err
	}
	st, ok := d["status"]
	if !ok {
		return false, nil
	}
	bumpGeneration(st, from, next)
	fresh := reflect.New(reflect.TypeOf(desired).Elem()).Interface()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d, fresh); err != nil {
		return false, err
	}
	reflect.ValueOf(desired).Elem().Set(reflect.ValueOf(fresh).Elem())
	return !equality.Semantic.DeepEqual(st, s["status"]), nil
}

// bumpGeneration walks an unstructured value and replaces observedGeneration: from with next.
func bumpGeneration(v any, from, next int64) {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if g, ok := x.(int64); ok && k == "observedGeneration" && g == from {
				t[k] = next
				continue
			}
			bumpGeneration(x, from, next)
		}
	case []any:
		for _, x := range t {
			bumpGeneration(x, from, next)
		}
	}
}

// copyStatus sets dst's status to src's.
func copyStatus(src, dst client.Object) error {
	s, err := runtime.DefaultUnstructuredConverter.ToUnstructured(src)
	if err != nil {
		return err
	}
	d, err := runtime.DefaultUnstructuredConverter.ToUnstructured(dst)
	if err != nil {
		return err
	}
	if st, ok := s["status"]; ok {
		d["status"] = st
	} else {
		delete(d, "status")
	}
	fresh := reflect.New(reflect.TypeOf(dst).Elem()).Interface()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d, fresh); err != nil {
		return err
	}
	reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(fresh).Elem())
	return nil
}

// EnsureFinalizer adds finalizer to obj and, when it was missing, stores it at once with the
// metadata and spec the pass changed so far; the status waits for Finish (SkipStatus). It
// reports whether it wrote. An object being deleted gets no new finalizer (the API server
// refuses them). On a conflict the pass should stop: Finish then writes nothing more and
// has the object reconciled again.
func (h *Helper) EnsureFinalizer(ctx context.Context, obj client.Object, finalizer string) (bool, error) {
	if !obj.GetDeletionTimestamp().IsZero() || !controllerutil.AddFinalizer(obj, finalizer) {
		return false, nil
	}
	if err := h.Patch(ctx, obj, SkipStatus); err != nil {
		return false, fmt.Errorf("storing finalizer %s: %w", finalizer, err)
	}
	return true, nil
}

// ConflictRetry is how soon a reconcile that worked from a stale copy (an optimistic-lock
// conflict) runs again on the newer one.
const ConflictRetry = 200 * time.Millisecond

// Finish persists obj at the end of a reconcile (call it in a defer) and folds the outcome
// into the reconcile's results: NotFound means the object is gone (its last finalizer was
// removed), and there is nothing left to write; a conflict, here or in an earlier Patch of
// the pass, means the reconcile worked from a stale copy, so nothing more is written and it
// runs again quietly on the newer one; any other error joins retErr. When retErr is set,
// the result is cleared, as controller-runtime ignores it anyway. It reports whether obj is
// stored as the pass left it (written, or nothing to write), which is when events telling of
// the pass's changes are true.
func (h *Helper) Finish(ctx context.Context, obj client.Object, res *ctrl.Result, retErr *error, opts ...Option) bool {
	if h.stale {
		if *retErr == nil || apierrors.IsConflict(*retErr) {
			*res, *retErr = ctrl.Result{RequeueAfter: ConflictRetry}, nil
		} else {
			*res = ctrl.Result{}
		}
		return false
	}
	err := h.Patch(ctx, obj, opts...)
	switch {
	case err == nil || apierrors.IsNotFound(err):
	case apierrors.IsConflict(err) && *retErr == nil:
		*res = ctrl.Result{RequeueAfter: ConflictRetry}
	default:
		kind := reflect.TypeOf(obj).Elem().Name()
		*retErr = kerrors.NewAggregate([]error{*retErr, fmt.Errorf("patching %s: %w", kind, err)})
	}
	if *retErr != nil {
		*res = ctrl.Result{}
	}
	return err == nil
}
