package synccommon

import (
	"context"
	"fmt"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/patch"
)

// Scope is one sync pass's hold on the Machine API copy of a pair. The pass's steps change
// the copy in memory (its finalizer, the delete marks carried to it, its spec and status when
// the Cluster API is the source) and say what Synchronized should report; Finish then writes
// the copy once, through the patch helper (one patch for metadata and spec, one for status,
// Synchronized included), and only then emits the events that describe what was written.
// The Cluster API copy and its infrastructure are written by the steps themselves: each is
// written at most once per pass.
type Scope struct {
	obj    client.Object
	conds  *[]machinev1beta1.Condition
	synced *int64
	helper *patch.Helper
	rec    record.EventRecorder

	outcome *outcome
	events  []event
}

// outcome is what Synchronized is to report at the end of the pass.
type outcome struct {
	reason     string
	errs       field.ErrorList
	detail     error
	generation int64
	// warning is the message of the warning event a change of Synchronized to this
	// outcome brings ("" for none).
	warning string
}

type event struct{ typ, reason, message string }

// NewScope starts a pass over obj, the Machine API copy as just read (nil when there is
// none: a Cluster API resource waiting for its copy); conds and synced point at its
// Synchronized condition's list and its status.synchronizedGeneration (nil for kinds
// without one).
func NewScope(c client.Client, rec record.EventRecorder, obj client.Object, conds *[]machinev1beta1.Condition, synced *int64) *Scope {
	s := &Scope{obj: obj, conds: conds, synced: synced, rec: rec}
	if obj != nil {
		s.helper = patch.NewHelper(obj, c)
	}
	return s
}

// EnsureFinalizer stores the sync finalizer on the Machine API copy at once (before anything
// is written on the other side, so a deletion always reaches the sync) and lets the pass go
// on.
func (s *Scope) EnsureFinalizer(ctx context.Context) error {
	_, err := s.helper.EnsureFinalizer(ctx, s.obj, authority.SyncFinalizer)
	return err
}

// StoreSpec writes the metadata and spec the pass changed so far at once, the status waiting
// for Finish: for a step whose later steps must see the generation the write gives.
func (s *Scope) StoreSpec(ctx context.Context) error {
	return s.helper.Patch(ctx, s.obj, patch.SkipStatus)
}

// Synchronized records the pass's outcome for Finish to write: reason with the conversion
// errors or the detail that stopped it, or (generation > 0) the generation it brought in
// step. Without a Machine API copy there is nothing to record it on: conversion errors are
// then returned, to be logged and retried.
func (s *Scope) Synchronized(reason string, errs field.ErrorList, detail error, generation int64) error {
	if s.obj == nil {
		if len(errs) > 0 {
			return fmt.Errorf("%s: %w", reason, errs.ToAggregate())
		}
		return nil
	}
	s.outcome = &outcome{reason: reason, errs: errs, detail: detail, generation: generation}
	if len(errs) > 0 {
		s.outcome.warning = "Cannot synchronise: " + errs.ToAggregate().Error()
	}
	return nil
}

// NotMirror records that the sync leaves capi, an active Cluster API resource of kind
// capiKind it did not make (NotMirror), alone: Synchronized=False with reason, naming it and
// what to do, and a warning event when that is new.
func (s *Scope) NotMirror(reason, capiKind string, capi client.Object) {
	why := notMirrorError(capiKind, capi)
	s.outcome = &outcome{reason: reason, detail: why, warning: why.Error()}
}

// Eventf queues an event on the Machine API copy, emitted once Finish has stored the change
// it tells of.
func (s *Scope) Eventf(typ, reason, format string, args ...any) {
	s.events = append(s.events, event{typ: typ, reason: reason, message: fmt.Sprintf(format, args...)})
}

// Finish writes what the pass changed in the Machine API copy, the recorded outcome
// included, and folds the write into the pass's result (patch.Helper.Finish); the queued
// events follow a successful write.
func (s *Scope) Finish(ctx context.Context, res *ctrl.Result, retErr *error) {
	if s.obj == nil {
		return
	}
	if o := s.outcome; o != nil {
		if authority.SetSynchronized(s.conds, o.reason, o.errs, o.detail) && o.warning != "" {
			s.Eventf(corev1.EventTypeWarning, o.reason, "%s", o.warning)
		}
		if s.synced != nil && o.generation > 0 {
			*s.synced = o.generation
		}
	}
	if !s.helper.Finish(ctx, s.obj, res, retErr) || s.rec == nil {
		return
	}
	for _, e := range s.events {
		s.rec.Event(s.obj, e.typ, e.reason, e.message)
	}
}
