// Package migration hands authority over a Machine, MachineSet or MachineHealthCheck from one
// API to the other when a user changes the Machine API copy's spec.authoritativeAPI:
//
//	check Synchronized → status Migrating → pause the old side and wait for its Paused=True
//	→ check the latest generation is synced → (to the Cluster API: unpause the new side,
//	its finalizers with it) → move finalizers → status.authoritativeAPI = spec.
//
// Every step is decided from the objects alone, so a crash at any point resumes where it
// stopped; setting spec back while Migrating rolls back.
package migration

import (
	"context"
	"errors"
	"fmt"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/patch"
)

// Condition type and reasons reported on the Machine API copy.
const (
	MigrationCondition machinev1beta1.ConditionType = "AuthorityMigration"

	NotSynchronizedReason  = "NotSynchronized"
	WaitingForPausedReason = "WaitingForPaused"
	WaitingForSyncReason   = "WaitingForSync"
	CompletedReason        = "Completed"
	// HandoverStepFailedReason: a step after the pause (moving finalizers, unpausing the new
	// side) keeps failing; the message has the error.
	HandoverStepFailedReason = "HandoverStepFailed"
	// NotConvertibleReason: the resource uses what the target API cannot carry (a Cluster API
	// MachineHealthCheck's Cluster API-only features); it stays where it is until they go.
	NotConvertibleReason = "NotConvertible"
	RolledBackReason     = "RolledBack"
)

// PendingRetry is how often a refused or waiting migration is looked at again.
const PendingRetry = 5 * time.Second

// subject is one resource under migration, with both copies loaded.
type subject interface {
	// mapiObject is the Machine API copy (conditions and events go there).
	mapiObject() client.Object
	conditions() *[]machinev1beta1.Condition
	// requested, current and previous authority: spec, status, and status.synchronizedAPI.
	authorities() (requested, current, previous machinev1beta1.MachineAuthority)
	// synchronized reports whether the copies match at the authoritative side's generation.
	synchronized() (bool, string)
	// setAuthority writes status.authoritativeAPI and synchronizedAPI and, when generation is
	// not zero, synchronizedGeneration (leaving Migrating is the one write allowed to lower it:
	// it then counts the new authority's generations).
	setAuthority(ctx context.Context, c client.Client, current, previous machinev1beta1.MachineAuthority, generation int64, cond *machinev1beta1.Condition) error
	// generation is the current generation of one side's copy.
	generation(side machinev1beta1.MachineAuthority) int64
	// hasCAPI says whether a Cluster API copy exists.
	hasCAPI() bool
	// pauseCAPI sets or clears the paused annotation on the Cluster API copies.
	pauseCAPI(ctx context.Context, c client.Client, paused bool) error
	// capiCopies are the loaded Cluster API copies pauseCAPI writes (nil ones included).
	capiCopies() []client.Object
	// paused reports whether the side's controller acknowledged the pause (Paused=True).
	paused(side machinev1beta1.MachineAuthority) (bool, string)
	// moveFinalizers makes the controller finalizers follow authority to side `to`; it
	// returns false while it still has steps to do (each step is persisted first).
	moveFinalizers(ctx context.Context, c client.Client, to machinev1beta1.MachineAuthority) (bool, error)
}

// engine runs the handover steps for any subject.
type engine struct {
	client client.Client
	// live reads from the API server, not the cache (rollback's reads of the copies).
	live     client.Reader
	recorder record.EventRecorder
	pending  *pendingMetric
}

func (e *engine) run(ctx context.Context, s subject) (ctrl.Result, error) {
	res, err := e.step(ctx, s)
	if apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: patch.ConflictRetry}, nil // worked from a stale copy
	}
	return res, err
}

func (e *engine) step(ctx context.Context, s subject) (ctrl.Result, error) {
	requested, current, previous := s.authorities()
	obj := s.mapiObject()
	switch {
	case current == "" || requested == "":
		return ctrl.Result{}, nil // decided first, by the Machine API controllers or the sync
	case current != machinev1beta1.MachineAuthorityMigrating && requested == current:
		e.pending.done(obj)
		return ctrl.Result{}, nil
	case current != machinev1beta1.MachineAuthorityMigrating:
		return e.start(ctx, s, requested, current)
	}
	if previous == "" {
		return ctrl.Result{}, fmt.Errorf("status.authoritativeAPI is Migrating but status.synchronizedAPI is empty: cannot tell where from")
	}
	if requested == previous {
		return e.rollback(ctx, s, previous)
	}
	return e.handover(ctx, s, previous, requested)
}

// start checks that the resource can move and marks it Migrating.
func (e *engine) start(ctx context.Context, s subject, to, from machinev1beta1.MachineAuthority) (ctrl.Result, error) {
	obj := s.mapiObject()
	age := e.pending.observe(obj)
	if refused, err := e.refused(ctx, s, from, to); refused || err != nil {
		return ctrl.Result{RequeueAfter: PendingRetry}, err
	}
	if ok, why := s.synchronized(); !ok {
		if mapicond.IsTrue(*s.conditions(), authority.SynchronizedCondition) {
			// The copies matched; the sync has yet to see the latest generation (the request
			// itself bumped it). Nothing is wrong: wait without a warning, and say so only
			// if it lasts.
			var err error
			if age >= quietWait {
				_, err = e.setCondition(ctx, s, corev1.ConditionFalse, WaitingForSyncReason, why)
			}
			return ctrl.Result{RequeueAfter: nextLook(age)}, err
		}
		msg := fmt.Sprintf("cannot move from %s to %s: %s", from, to, why)
		changed, err := e.setCondition(ctx, s, corev1.ConditionFalse, NotSynchronizedReason, msg)
		if changed {
			e.event(obj, corev1.EventTypeWarning, NotSynchronizedReason, "%s", msg)
		}
		return ctrl.Result{RequeueAfter: PendingRetry}, err
	}
	if to == machinev1beta1.MachineAuthorityClusterAPI && !s.hasCAPI() {
		_, err := e.setCondition(ctx, s, corev1.ConditionFalse, WaitingForSyncReason, "the Cluster API copy does not exist yet")
		return ctrl.Result{RequeueAfter: PendingRetry}, err
	}
	if err := s.setAuthority(ctx, e.client, machinev1beta1.MachineAuthorityMigrating, from, 0,
		condition(corev1.ConditionFalse, "Started", "moving authority from "+string(from)+" to "+string(to))); err != nil {
		return ctrl.Result{}, err
	}
	e.event(obj, corev1.EventTypeNormal, "MigrationStarted", "Moving authority from %s to %s", from, to)
	return ctrl.Result{}, nil
}

// quietWait is how long a migration waits for something routine (the sync catching up with
// the generation the request itself bumped; the old side acknowledging its pause) before its
// condition says so. Both usually take under a second, and reporting each cost a status write
// per Machine, half of them conflicting with the very write they waited for (measured: bench
// migrate).
const quietWait = 5 * time.Second

// nextLook is when a routine wait is looked at again if no event comes first: when it is due
// to be reported, then every PendingRetry. What it waits for (the sync's write, the Machine
// API copy's acknowledgement) is a change of the Machine API copy, which brings a pass at
// once; the look is only a safety net (looking every second added passes to a queue in which,
// migrating 3000 Machines at once, each already waits about half a minute: bench migrate).
func nextLook(age time.Duration) time.Duration {
	if age < quietWait {
		return quietWait - age
	}
	return PendingRetry
}

// handover walks the steps from `from` to `to`; each step not yet done returns.
func (e *engine) handover(ctx context.Context, s subject, from, to machinev1beta1.MachineAuthority) (ctrl.Result, error) {
	obj := s.mapiObject()
	age := e.pending.observe(obj)
	// 1. The old side is paused and says so.
	if from == machinev1beta1.MachineAuthorityClusterAPI {
		if err := s.pauseCAPI(ctx, e.client, true); err != nil {
			return ctrl.Result{}, err
		}
	}
	if ok, why, err := e.acknowledged(ctx, s, from); err != nil || !ok {
		if err != nil {
			return ctrl.Result{}, err
		}
		if age >= quietWait {
			_, err = e.setCondition(ctx, s, corev1.ConditionFalse, WaitingForPausedReason, "waiting for the "+string(from)+" controllers to pause: "+why)
		}
		if from == machinev1beta1.MachineAuthorityClusterAPI {
			// The InfraMachine's acknowledgement is not watched here: look every second.
			return ctrl.Result{RequeueAfter: time.Second}, err
		}
		return ctrl.Result{RequeueAfter: nextLook(age)}, err
	}
	// 2. The latest state of the old side is synchronised, and all of it can be carried.
	if refused, err := e.refused(ctx, s, from, to); refused || err != nil {
		return ctrl.Result{RequeueAfter: PendingRetry}, err
	}
	if ok, why := s.synchronized(); !ok {
		_, err := e.setCondition(ctx, s, corev1.ConditionFalse, WaitingForSyncReason, why)
		return ctrl.Result{RequeueAfter: PendingRetry}, err
	}
	// 3. Going to the Cluster API, the new side is unpaused (its InfraMachine knowing it is
	// provisioned), each copy taking its controller finalizer in the same write.
	if to == machinev1beta1.MachineAuthorityClusterAPI {
		if err := e.activateCAPI(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	// 4. Finalizers follow authority (on the new side before they leave the old), then the
	// authority names the new side.
	done, err := s.moveFinalizers(ctx, e.client, to)
	if err != nil || !done {
		return ctrl.Result{RequeueAfter: time.Second}, e.stepFailed(ctx, s, "moving the finalizers to the "+string(to)+" copies", err)
	}
	completed := condition(corev1.ConditionTrue, CompletedReason, "authority moved from "+string(from)+" to "+string(to))
	if err := s.setAuthority(ctx, e.client, to, to, s.generation(to), completed); err != nil {
		return ctrl.Result{}, err
	}
	e.event(obj, corev1.EventTypeNormal, "Migrated", "Authority moved from %s to %s", from, to)
	e.pending.done(obj)
	return ctrl.Result{}, nil
}

// activateCAPI primes the InfraMachine, if the subject has one, and unpauses the Cluster API
// copies.
func (e *engine) activateCAPI(ctx context.Context, s subject) error {
	if p, ok := s.(infraPrimer); ok {
		if err := p.primeInfra(ctx, e.client); err != nil {
			return e.stepFailed(ctx, s, "marking the InfraMachine provisioned", err)
		}
	}
	if err := s.pauseCAPI(ctx, e.client, false); err != nil {
		return e.stepFailed(ctx, s, "unpausing the ClusterAPI copies", err)
	}
	return nil
}

// rollback returns authority to where it was before the migration started. Going back to
// the Machine API, the Cluster API copies may already have been unpaused (the handover's
// last steps): they are paused again, and their controllers must say so, before the
// finalizers move back — only one side may act at a time.
//
// The copies are read from the API server first. A pass that worked from the request before
// it was taken back may have paused or unpaused them moments ago, and the cache may not show
// that write yet: acting on the older copy, the rollback would see nothing to undo, leaving
// both sides paused (going back to the Cluster API: bench soak seed 3) or an unpaused copy
// taken for a paused one (going back to the Machine API).
func (e *engine) rollback(ctx context.Context, s subject, to machinev1beta1.MachineAuthority) (ctrl.Result, error) {
	if err := e.readLive(ctx, s.capiCopies()); err != nil {
		return ctrl.Result{}, err
	}
	if err := s.pauseCAPI(ctx, e.client, to == machinev1beta1.MachineAuthorityMachineAPI); err != nil {
		return ctrl.Result{}, err
	}
	if to == machinev1beta1.MachineAuthorityMachineAPI {
		if ok, why, err := e.acknowledged(ctx, s, machinev1beta1.MachineAuthorityClusterAPI); err != nil || !ok {
			if err != nil {
				return ctrl.Result{}, err
			}
			_, err = e.setCondition(ctx, s, corev1.ConditionFalse, WaitingForPausedReason, "rolling back: waiting for the ClusterAPI controllers to pause: "+why)
			return ctrl.Result{RequeueAfter: time.Second}, err
		}
	}
	if done, err := s.moveFinalizers(ctx, e.client, to); err != nil || !done {
		return ctrl.Result{RequeueAfter: time.Second}, err
	}
	undone := condition(corev1.ConditionTrue, RolledBackReason, "the migration was cancelled; "+string(to)+" stays authoritative")
	if err := s.setAuthority(ctx, e.client, to, to, s.generation(to), undone); err != nil {
		return ctrl.Result{}, err
	}
	e.event(s.mapiObject(), corev1.EventTypeNormal, RolledBackReason, "Migration cancelled; %s stays authoritative", to)
	e.pending.done(s.mapiObject())
	return ctrl.Result{}, nil
}

// readLive reads each copy again from the API server, in place; a gone copy keeps what was
// read before (writing it then finds it gone, which is nothing to do).
func (e *engine) readLive(ctx context.Context, copies []client.Object) error {
	for _, o := range copies {
		if isNil(o) {
			continue
		}
		if err := client.IgnoreNotFound(e.live.Get(ctx, client.ObjectKeyFromObject(o), o)); err != nil {
			return fmt.Errorf("reading the Cluster API copies from the API server: %w", err)
		}
	}
	return nil
}

// acknowledged reports whether every controller of the side has acknowledged its pause: the
// side's own copy and, going from the Cluster API, the InfraMachine's provider, whose
// controller is the one that launches instances.
func (e *engine) acknowledged(ctx context.Context, s subject, side machinev1beta1.MachineAuthority) (bool, string, error) {
	if ok, why := s.paused(side); !ok {
		return false, why, nil
	}
	if i, ok := s.(infraPauser); ok && side == machinev1beta1.MachineAuthorityClusterAPI {
		return i.infraPaused(ctx, e.client)
	}
	return true, "", nil
}

// infraPauser is a subject whose Cluster API side includes an InfraMachine.
// refuser is a subject that may not be movable to an API at all, whatever the sync does.
type refuser interface {
	// refusal says why the subject cannot move to `to` ("" when it can).
	refusal(to machinev1beta1.MachineAuthority) string
}

// refused reports (on the condition, and in an event when the condition changes) a subject
// that cannot move to `to`; the error is the condition's write's.
func (e *engine) refused(ctx context.Context, s subject, from, to machinev1beta1.MachineAuthority) (bool, error) {
	r, ok := s.(refuser)
	if !ok {
		return false, nil
	}
	why := r.refusal(to)
	if why == "" {
		return false, nil
	}
	msg := fmt.Sprintf("cannot move from %s to %s: %s", from, to, why)
	changed, err := e.setCondition(ctx, s, corev1.ConditionFalse, NotConvertibleReason, msg)
	if changed {
		e.event(s.mapiObject(), corev1.EventTypeWarning, NotConvertibleReason, "%s", msg)
	}
	return true, err
}

type infraPauser interface {
	infraPaused(ctx context.Context, c client.Reader) (bool, string, error)
}

func condition(status corev1.ConditionStatus, reason, msg string) *machinev1beta1.Condition {
	return &machinev1beta1.Condition{Type: MigrationCondition, Status: status, Reason: reason, Message: msg}
}

// setCondition stores the Migration condition on the Machine API copy when it changes; changed
// says it did and the write was stored. A failed write is the pass's error (run catches a
// conflict: the pass runs again on the newer copy), so an event that goes with the condition
// is not sent for a condition that was not stored.
func (e *engine) setCondition(ctx context.Context, s subject, status corev1.ConditionStatus, reason, msg string) (changed bool, err error) {
	obj := s.mapiObject()
	base := obj.DeepCopyObject().(client.Object)
	if !mapicond.Set(s.conditions(), machinev1beta1.Condition{Type: MigrationCondition, Status: status, Reason: reason, Message: msg}) {
		return false, nil
	}
	if err := patch.StoreStatus(ctx, e.client, obj, base); err != nil {
		return false, fmt.Errorf("storing the %s condition (%s): %w", MigrationCondition, reason, err)
	}
	return true, nil
}

// stepFailed reports a handover step's error on the Migration condition, so it does not keep
// saying what an earlier step waited for, and returns the step's error (with the condition's
// write's, if that failed too). Conflicts are a retry's business, not news.
func (e *engine) stepFailed(ctx context.Context, s subject, step string, err error) error {
	if err == nil || apierrors.IsConflict(err) {
		return err
	}
	_, condErr := e.setCondition(ctx, s, corev1.ConditionFalse, HandoverStepFailedReason, step+": "+err.Error())
	return errors.Join(err, condErr)
}

func (e *engine) event(o client.Object, typ, reason, format string, args ...any) {
	if e.recorder != nil {
		e.recorder.Eventf(o, typ, reason, format, args...)
	}
}
