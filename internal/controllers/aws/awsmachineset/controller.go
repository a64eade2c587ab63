// Package awsmachineset is the Machine API MachineSet controller of the AWS provider, the
// counterpart of OpenShift's AWS MachineSet controller: it tells the cluster autoscaler what a
// Node of a MachineSet would offer, so the autoscaler can scale the MachineSet from (and to)
// zero.
//
// For every MachineSet whose template carries an AWSMachineProviderConfig it describes the
// instance type through EC2 DescribeInstanceTypes (aws-sdk-go-v2; answers cached per region)
// and sets machine.openshift.io/vCPU, machine.openshift.io/memoryMb, machine.openshift.io/GPU
// and the kubernetes.io/arch entry of capacity.cluster-autoscaler.kubernetes.io/labels, the
// same annotations the simulated provider's simmachineset sets. The region is the
// providerSpec's placement.region, else the Infrastructure's; calls are signed with the
// providerSpec's credentialsSecret, else the configured default credentials. The outcome is
// the CapacityAnnotated condition. Other providers' MachineSets are ignored, and so are
// MachineSets the Machine API is not authoritative for.
package awsmachineset

import (
	"context"
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

	"github.com/machina-dev/machina/internal/controllers/sim/simmachineset"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/patch"
	"github.com/machina-dev/machina/internal/requeue"
)

// CapacityAnnotatedCondition says whether the MachineSet carries the scale-from-zero
// annotations of its instance type (the simulated provider's condition, for the same thing).
const CapacityAnnotatedCondition = simmachineset.CapacityAnnotatedCondition

// Reasons of CapacityAnnotated.
const (
	// InstanceTypeFoundReason: the annotations describe the instance type (True).
	InstanceTypeFoundReason = simmachineset.InstanceTypeFoundReason
	// InvalidInstanceTypeReason: EC2 has no such instance type, or none is given; the
	// annotations were removed (False).
	InvalidInstanceTypeReason = simmachineset.InvalidInstanceTypeReason
	// InvalidProviderSpecReason: the providerSpec does not decode, or names no region;
	// annotations removed (False).
	InvalidProviderSpecReason = simmachineset.InvalidProviderSpecReason
	// CloudUnavailableReason: EC2 could not be asked (throttled, unreachable, no usable
	// credentials); the annotations are left as they were and the lookup is retried
	// with backoff (Unknown).
	CloudUnavailableReason = simmachineset.CloudUnavailableReason
)

// DefaultResync is how often a MachineSet is looked at again without an event. Instance
// types do not change, so this is slow.
const DefaultResync = 10 * time.Minute

// Reconciler reconciles the scale-from-zero annotations of AWS MachineSets.
type Reconciler struct {
	Client   client.Client
	Recorder record.EventRecorder
	// Types describes instance types; NewInstanceTypes(Config{}) (the SDK's standard
	// endpoint and credentials) when nil.
	Types *InstanceTypes
	// Resync is how often a MachineSet is reconciled without an event (DefaultResync when 0).
	Resync time.Duration
	// SyncNamespace is the Machine API namespace whose undecided status.authoritativeAPI the
	// sync controllers decide when they run in this process (empty otherwise; gate.MachineAPI).
	SyncNamespace string
}

// +kubebuilder:rbac:groups=machine.openshift.io,resources=machinesets;machinesets/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=config.openshift.io,resources=infrastructures,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch

// SetupWithManager registers the controller. Status-only updates (replica counts) do not
// concern it, except a change of status.authoritativeAPI.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Types == nil {
		r.Types = NewInstanceTypes(Config{})
	}
	authorityChanged := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*machinev1beta1.MachineSet)
		n, ok2 := e.ObjectNew.(*machinev1beta1.MachineSet)
		return ok1 && ok2 && o.Status.AuthoritativeAPI != n.Status.AuthoritativeAPI
	}}
	return ctrl.NewControllerManagedBy(mgr).
		Named("machineapi-awsmachineset").
		For(&machinev1beta1.MachineSet{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, authorityChanged))).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Complete(r)
}

// Reconcile brings one MachineSet's scale-from-zero annotations in line with EC2.
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
	d, _, err := gate.MachineAPI(ms.DeepCopy(), r.SyncNamespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	if d.Paused {
		log.FromContext(ctx).V(1).Info("not reconciling", "reason", d.Message)
		return ctrl.Result{}, nil
	}
	ps, isAWS, decodeErr := providerSpec(ms)
	if !isAWS {
		return ctrl.Result{}, nil
	}

	helper := patch.NewHelper(ms, r.Client)
	defer helper.Finish(ctx, ms, &res, &retErr)

	switch {
	case decodeErr != nil:
		r.invalid(ms, InvalidProviderSpecReason, decodeErr.Error())
		return ctrl.Result{}, nil
	case ps.InstanceType == "":
		r.invalid(ms, InvalidInstanceTypeReason, instanceTypePath+": Required value: the autoscaler needs an instance type to scale from zero")
		return ctrl.Result{}, nil
	}
	return r.annotate(ctx, ms, ps)
}

// annotate describes the instance type and sets the annotations and condition.
func (r *Reconciler) annotate(ctx context.Context, ms *machinev1beta1.MachineSet, ps *machinev1beta1.AWSMachineProviderConfig) (ctrl.Result, error) {
	region, err := regionOf(ctx, r.Client, ps)
	if err != nil {
		return ctrl.Result{}, err
	}
	if region == "" {
		r.invalid(ms, InvalidProviderSpecReason, regionPath+
			": Required value: no region: neither the providerSpec nor Infrastructure cluster (status.platformStatus.aws.region) names one")
		return ctrl.Result{RequeueAfter: requeue.After(r.Resync, DefaultResync)}, nil
	}
	creds, err := credentialsOf(ctx, r.Client, ms.Namespace, ps)
	if err != nil {
		r.unavailable(ms, err.Error())
		return ctrl.Result{}, err
	}
	t, err := r.Types.Describe(ctx, region, ps.InstanceType, creds)
	switch {
	case IsInvalidInstanceType(err):
		r.invalid(ms, InvalidInstanceTypeReason, fmt.Sprintf(
			"%s: Invalid value: %q: EC2 in %s does not offer this instance type (%v); the scale-from-zero annotations are removed",
			instanceTypePath, ps.InstanceType, region, err))
		return ctrl.Result{RequeueAfter: requeue.After(r.Resync, DefaultResync)}, nil
	case err != nil:
		r.unavailable(ms, fmt.Sprintf("describing instance type %q in %s: %v", ps.InstanceType, region, err))
		return ctrl.Result{}, fmt.Errorf("describing instance type %q in %s: %w", ps.InstanceType, region, err)
	}
	ms.Annotations = simmachineset.ApplyCapacity(ms.Annotations, t)
	mapicond.Set(&ms.Status.Conditions, machinev1beta1.Condition{Type: CapacityAnnotatedCondition,
		Status: corev1.ConditionTrue, Reason: InstanceTypeFoundReason,
		Message: fmt.Sprintf("instance type %s: %d vCPU, %d MiB memory, %d GPU, %s", t.Name, t.VCPU, t.MemoryMiB, t.GPU, t.Architecture)})
	return ctrl.Result{RequeueAfter: requeue.After(r.Resync, DefaultResync)}, nil
}

// invalid removes the annotations, sets CapacityAnnotated False and, when that is news,
// records a Warning event.
func (r *Reconciler) invalid(ms *machinev1beta1.MachineSet, reason, msg string) {
	ms.Annotations = simmachineset.RemoveCapacity(ms.Annotations)
	changed := mapicond.Set(&ms.Status.Conditions, machinev1beta1.Condition{Type: CapacityAnnotatedCondition,
		Status: corev1.ConditionFalse, Reason: reason, Message: msg, Severity: machinev1beta1.ConditionSeverityWarning})
	if changed {
		events.Eventf(r.Recorder, ms, corev1.EventTypeWarning, reason, "%s", msg)
	}
}

// unavailable sets CapacityAnnotated Unknown, leaving the annotations as they are: a passing
// EC2 outage must not make the autoscaler forget what it knew.
func (r *Reconciler) unavailable(ms *machinev1beta1.MachineSet, msg string) {
	mapicond.Set(&ms.Status.Conditions, machinev1beta1.Condition{Type: CapacityAnnotatedCondition,
		Status: corev1.ConditionUnknown, Reason: CloudUnavailableReason, Message: msg})
}
