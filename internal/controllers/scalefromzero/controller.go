package scalefromzero

import (
	"context"
	"errors"
	"fmt"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/patch"
	"github.com/machina-dev/machina/internal/requeue"
)

// CapacityAnnotatedCondition says whether the MachineSet carries the scale-from-zero
// annotations of its instance type.
const CapacityAnnotatedCondition machinev1beta1.ConditionType = "CapacityAnnotated"

// Reasons of CapacityAnnotated.
const (
	// InstanceTypeFoundReason: the annotations describe the instance type (True).
	InstanceTypeFoundReason = "InstanceTypeFound"
	// InvalidInstanceTypeReason: the cloud has no such instance type, or none is given; the
	// annotations were removed (False).
	InvalidInstanceTypeReason = "InvalidInstanceType"
	// InvalidProviderSpecReason: the providerSpec does not decode or misses what the lookup
	// needs; annotations removed (False).
	InvalidProviderSpecReason = "InvalidProviderSpec"
	// CloudUnavailableReason: the cloud could not be asked; the annotations are left as they
	// were (a passing outage must not make the autoscaler forget what it knew) and the lookup
	// is retried with backoff (Unknown).
	CloudUnavailableReason = "CloudUnavailable"
)

// DefaultResync is how often a MachineSet is looked at again without an event. Instance types
// do not change, so this is slow.
const DefaultResync = 10 * time.Minute

// Describer is a platform's half of the controller.
type Describer interface {
	// Describe says what a Node of ms would offer. claimed is false for a MachineSet that
	// is not the platform's (its providerSpec is another provider's, or there is none); an
	// *InvalidError when the providerSpec or its instance type cannot be described; any
	// other error when the cloud could not be asked.
	Describe(ctx context.Context, ms *machinev1beta1.MachineSet) (t api.InstanceType, claimed bool, err error)
}

// InvalidError is a MachineSet the autoscaler cannot be told about until the user changes it.
type InvalidError struct {
	Reason  string // InvalidProviderSpecReason or InvalidInstanceTypeReason
	Message string // names the field
}

func (e *InvalidError) Error() string { return e.Message }

// Invalid returns an *InvalidError.
func Invalid(reason, format string, args ...any) error {
	return &InvalidError{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Reconciler keeps the scale-from-zero annotations and the CapacityAnnotated condition of
// the MachineSets one platform claims. MachineSets the Machine API is not authoritative for
// are left alone.
type Reconciler struct {
	Client   client.Client
	Recorder record.EventRecorder
	// Name is the controller's name, unique in the manager.
	Name string
	// Describer is the platform's lookup.
	Describer Describer
	// Resync is how often a MachineSet is reconciled without an event (DefaultResync when 0).
	Resync time.Duration
}

// The platforms' packages carry the RBAC markers (machinesets and machinesets/status: get,
// list, watch, update, patch; events: create, patch), so each platform's role holds them.

// SetupWithManager registers the controller. Status-only updates (replica counts) do not
// concern it, except a change of status.authoritativeAPI.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	authorityChanged := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*machinev1beta1.MachineSet)
		n, ok2 := e.ObjectNew.(*machinev1beta1.MachineSet)
		return ok1 && ok2 && o.Status.AuthoritativeAPI != n.Status.AuthoritativeAPI
	}}
	return ctrl.NewControllerManagedBy(mgr).
		Named(r.Name).
		For(&machinev1beta1.MachineSet{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, authorityChanged))).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Complete(r)
}

// Reconcile brings one MachineSet's scale-from-zero annotations in line with the cloud.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	ms := &machinev1beta1.MachineSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, ms); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ms.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	// The gate works on a copy: the MachineSet controller owns status.authoritativeAPI and
	// the Paused condition; this controller only needs the decision.
	d, _, err := gate.MachineAPI(ms.DeepCopy())
	if err != nil {
		return ctrl.Result{}, err
	}
	if d.Paused {
		log.FromContext(ctx).V(1).Info("not reconciling", "reason", d.Message)
		return ctrl.Result{}, nil
	}
	t, claimed, err := r.Describer.Describe(ctx, ms)
	if !claimed {
		return ctrl.Result{}, nil
	}

	helper := patch.NewHelper(ms, r.Client)
	defer helper.Finish(ctx, ms, &res, &retErr)

	var invalid *InvalidError
	switch {
	case errors.As(err, &invalid):
		r.invalid(ms, invalid)
		return ctrl.Result{RequeueAfter: requeue.After(r.Resync, DefaultResync)}, nil
	case err != nil:
		mapicond.Set(&ms.Status.Conditions, machinev1beta1.Condition{Type: CapacityAnnotatedCondition,
			Status: corev1.ConditionUnknown, Reason: CloudUnavailableReason, Message: err.Error()})
		return ctrl.Result{}, err
	}
	ms.Annotations = ApplyCapacity(ms.Annotations, t)
	mapicond.Set(&ms.Status.Conditions, machinev1beta1.Condition{Type: CapacityAnnotatedCondition,
		Status: corev1.ConditionTrue, Reason: InstanceTypeFoundReason,
		Message: fmt.Sprintf("instance type %s: %d vCPU, %d MiB memory, %d GPU, %s", t.Name, t.VCPU, t.MemoryMiB, t.GPU, t.Architecture)})
	return ctrl.Result{RequeueAfter: requeue.After(r.Resync, DefaultResync)}, nil
}

// invalid removes the annotations, sets CapacityAnnotated False and, when that is news,
// records a Warning event.
func (r *Reconciler) invalid(ms *machinev1beta1.MachineSet, e *InvalidError) {
	ms.Annotations = RemoveCapacity(ms.Annotations)
	changed := mapicond.Set(&ms.Status.Conditions, machinev1beta1.Condition{Type: CapacityAnnotatedCondition,
		Status: corev1.ConditionFalse, Reason: e.Reason, Message: e.Message, Severity: machinev1beta1.ConditionSeverityWarning})
	if changed {
		events.Eventf(r.Recorder, ms, corev1.EventTypeWarning, e.Reason, "%s", e.Message)
	}
}
