// Package simmachineset is the simulated provider's MachineSet controller of the Machine API,
// the counterpart of the provider-specific MachineSet controllers OpenShift runs for each
// cloud: it tells the cluster autoscaler what a Node of a MachineSet would offer, so the
// autoscaler can scale the MachineSet from (and to) zero.
//
// For every MachineSet whose template carries a SimMachineProviderSpec it looks the instance
// type up in the simulated cloud's catalogue and sets machine.openshift.io/vCPU,
// machine.openshift.io/memoryMb, machine.openshift.io/GPU and the kubernetes.io/arch entry of
// capacity.cluster-autoscaler.kubernetes.io/labels. It reports the outcome in the
// CapacityAnnotated condition. Other providers' MachineSets are ignored, and so are
// MachineSets the Machine API is not authoritative for.
package simmachineset

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/api"
	cloudclient "github.com/machina-dev/machina/internal/cloud/client"
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
	// InvalidInstanceTypeReason: the catalogue has no such instance type, or none is given;
	// the annotations were removed (False).
	InvalidInstanceTypeReason = "InvalidInstanceType"
	// InvalidProviderSpecReason: the providerSpec does not decode; annotations removed (False).
	InvalidProviderSpecReason = "InvalidProviderSpec"
	// CloudUnavailableReason: the catalogue could not be read; the annotations are left as
	// they were and the lookup is retried (Unknown).
	CloudUnavailableReason = "CloudUnavailable"
)

// DefaultResync is how often a MachineSet is looked at again without an event. The catalogue
// only changes when the cloud restarts, so this is slow.
const DefaultResync = 10 * time.Minute

const (
	specPath         = "spec.template.spec.providerSpec.value"
	instanceTypePath = specPath + ".instanceType"
	providerSpecKind = "SimMachineProviderSpec"
)

// Reconciler reconciles the scale-from-zero annotations of simulated-provider MachineSets.
type Reconciler struct {
	Client   client.Client
	Cloud    *cloudclient.Client
	Recorder record.EventRecorder
	// Resync is how often a MachineSet is reconciled without an event (DefaultResync when 0).
	Resync time.Duration
	// SyncNamespace is the Machine API namespace whose undecided status.authoritativeAPI the
	// sync controllers decide when they run in this process (empty otherwise; gate.MachineAPI).
	SyncNamespace string
}

// +kubebuilder:rbac:groups=machine.openshift.io,resources=machinesets;machinesets/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// SetupWithManager registers the controller. Status-only updates (replica counts) do not
// concern it, except a change of status.authoritativeAPI.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	authorityChanged := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*machinev1beta1.MachineSet)
		n, ok2 := e.ObjectNew.(*machinev1beta1.MachineSet)
		return ok1 && ok2 && o.Status.AuthoritativeAPI != n.Status.AuthoritativeAPI
	}}
	return ctrl.NewControllerManagedBy(mgr).
		Named("machineapi-simmachineset").
		For(&machinev1beta1.MachineSet{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, authorityChanged))).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Complete(r)
}

// Reconcile brings one MachineSet's scale-from-zero annotations in line with the catalogue.
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
	ps, sim, decodeErr := providerSpec(ms)
	if !sim {
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
	types, err := r.Cloud.DescribeInstanceTypes(ctx, ps.InstanceType)
	switch {
	case err == nil && len(types) == 1:
	case cloudclient.HasCode(err, api.CodeInvalidInstanceType) || (err == nil && len(types) != 1):
		r.invalid(ms, InvalidInstanceTypeReason, fmt.Sprintf(
			"%s: Invalid value: %q: not in the simulated cloud's catalogue of instance types; the scale-from-zero annotations are removed",
			instanceTypePath, ps.InstanceType))
		return ctrl.Result{RequeueAfter: requeue.After(r.Resync, DefaultResync)}, nil
	default:
		mapicond.Set(&ms.Status.Conditions, machinev1beta1.Condition{Type: CapacityAnnotatedCondition,
			Status: corev1.ConditionUnknown, Reason: CloudUnavailableReason,
			Message: fmt.Sprintf("reading instance type %q from the simulated cloud: %v", ps.InstanceType, err)})
		return ctrl.Result{}, fmt.Errorf("describing instance type %q: %w", ps.InstanceType, err)
	}
	t := types[0]
	ms.Annotations = ApplyCapacity(ms.Annotations, t)
	mapicond.Set(&ms.Status.Conditions, machinev1beta1.Condition{Type: CapacityAnnotatedCondition,
		Status: corev1.ConditionTrue, Reason: InstanceTypeFoundReason,
		Message: fmt.Sprintf("instance type %s: %d vCPU, %d MiB memory, %d GPU, %s", t.Name, t.VCPU, t.MemoryMiB, t.GPU, t.Architecture)})
	return ctrl.Result{RequeueAfter: requeue.After(r.Resync, DefaultResync)}, nil
}

// invalid removes the annotations, sets CapacityAnnotated False and, when that is news,
// records a Warning event.
func (r *Reconciler) invalid(ms *machinev1beta1.MachineSet, reason, msg string) {
	ms.Annotations = RemoveCapacity(ms.Annotations)
	changed := mapicond.Set(&ms.Status.Conditions, machinev1beta1.Condition{Type: CapacityAnnotatedCondition,
		Status: corev1.ConditionFalse, Reason: reason, Message: msg, Severity: machinev1beta1.ConditionSeverityWarning})
	if changed {
		events.Eventf(r.Recorder, ms, corev1.EventTypeWarning, reason, "%s", msg)
	}
}

// providerSpec decodes the SimMachineProviderSpec of a MachineSet's template. sim is false
// for a MachineSet without one or with another provider's (a kind, or an apiVersion of
// another group); err is set when it claims to be simulated but does not decode.
func providerSpec(ms *machinev1beta1.MachineSet) (ps *infrav1.SimMachineProviderSpec, sim bool, err error) {
	v := ms.Spec.Template.Spec.ProviderSpec.Value
	if v == nil {
		return nil, false, nil
	}
	raw := v.Raw
	if len(raw) == 0 {
		if v.Object == nil {
			return nil, false, nil
		}
		if raw, err = json.Marshal(v.Object); err != nil {
			return nil, true, fmt.Errorf("%s: %v", specPath, err)
		}
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(raw, &tm); err != nil {
		// Not even an object: the MachineSet controller reports it; nothing to annotate.
		return nil, false, nil
	}
	if tm.Kind != "" && tm.Kind != providerSpecKind {
		return nil, false, nil
	}
	if tm.APIVersion != "" {
		if gv, err := schema.ParseGroupVersion(tm.APIVersion); err != nil || gv.Group != infrav1.GroupVersion.Group {
			return nil, false, nil
		}
	}
	ps = &infrav1.SimMachineProviderSpec{}
	if err := json.NewDecoder(bytes.NewReader(raw)).Decode(ps); err != nil {
		return nil, true, fmt.Errorf("%s: not a %s: %v", specPath, providerSpecKind, err)
	}
	return ps, true, nil
}
