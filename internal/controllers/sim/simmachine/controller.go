// Package simmachine is the simulated provider's SimMachine controller, following the
// Cluster API infrastructure machine contract step by step: it waits for a Machine owner,
// the Cluster's infrastructure and the bootstrap data, then launches one instance in the
// simulated cloud (idempotently: the SimMachine's UID is the client token) and reports its
// providerID, addresses and zone. A SimMachine whose spec.providerID is already set adopts
// that instance instead of launching one: this is how authority over a machine moves from the
// Machine API to Cluster API without replacing it.
package simmachine

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	cloudclient "github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/patch"
	"github.com/machina-dev/machina/internal/requeue"
)

// Retry intervals.
const (
	PendingRequeue   = time.Second
	SecretRetry      = 5 * time.Second
	CapacityRetry    = 30 * time.Second
	UnavailableRetry = 10 * time.Second
	DefaultResync    = 60 * time.Second
)

// Reconciler reconciles SimMachines.
type Reconciler struct {
	Client   client.Client
	Cloud    *cloudclient.Client
	Recorder record.EventRecorder
	Resync   time.Duration
	// MaxConcurrentReconciles defaults to 10.
	MaxConcurrentReconciles int
	// running counts the SimMachines whose running instances are resynced.
	running requeue.Fleet
}

// +kubebuilder:rbac:groups=infrastructure.machina.dev,resources=simmachines;simmachines/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.machina.dev,resources=simclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;machines,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch

// SetupWithManager registers the controller. The owning Machine (bootstrap data arrives) and
// the Cluster (infrastructure provisioned, paused) bring a SimMachine back; of a Machine only
// a change of its spec (what a pass reads: bootstrap data, failure domain, cluster name), and
// of a Cluster only what gate.ClusterChanged passes, not their status updates.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.MaxConcurrentReconciles == 0 {
		r.MaxConcurrentReconciles = 10
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("sim-simmachine").
		For(&infrav1.SimMachine{}).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(machineToSimMachine), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToSimMachines), builder.WithPredicates(gate.ClusterChanged)).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles}).
		Complete(r)
}

func machineToSimMachine(_ context.Context, o client.Object) []reconcile.Request {
	m, ok := o.(*clusterv1.Machine)
	if !ok || m.Spec.InfrastructureRef.Kind != "SimMachine" || m.Spec.InfrastructureRef.APIGroup != infrav1.GroupVersion.Group {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: m.Namespace, Name: m.Spec.InfrastructureRef.Name}}}
}

func (r *Reconciler) clusterToSimMachines(ctx context.Context, o client.Object) []reconcile.Request {
	var list infrav1.SimMachineList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()),
		client.MatchingLabels{clusterv1.ClusterNameLabel: o.GetName()}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, sm := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: sm.Namespace, Name: sm.Name}})
	}
	return out
}

// Reconcile is one pass over a SimMachine.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	sm := &infrav1.SimMachine{}
	if err := r.Client.Get(ctx, req.NamespacedName, sm); err != nil {
		r.running.Gone(req.NamespacedName)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	helper := patch.NewHelper(sm, r.Client)
	// The status is computed for the spec this pass writes (spec.providerID): it is stored
	// with the generation that write produces, in the same status patch.
	defer helper.Finish(ctx, sm, &res, &retErr, patch.OwnSpecChange)

	machine, err := r.ownerMachine(ctx, sm)
	if err != nil {
		return ctrl.Result{}, err
	}
	cluster, err := r.cluster(ctx, sm, machine)
	if err != nil {
		return ctrl.Result{}, err
	}
	wasPaused := meta.IsStatusConditionTrue(sm.Status.Conditions, clusterv1.PausedCondition)
	d, _ := gate.ClusterAPI(sm, cluster, &sm.Status.Conditions)
	if d.Paused {
		log.FromContext(ctx).V(1).Info("not reconciling", "reason", d.Message)
		return r.reconcilePaused(ctx, sm, wasPaused)
	}
	if d.Resumed && !lookupOnly(sm) {
		return ctrl.Result{}, nil // the end of the pause is stored before anything acts
	}
	if !sm.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, sm)
	}
	// The contract's exits: no Machine owner yet, a terminal failure, no Cluster.
	if machine == nil {
		return ctrl.Result{}, nil
	}
	if terminal(sm) {
		return ctrl.Result{}, nil
	}
	if cluster == nil {
		return ctrl.Result{}, nil
	}
	// The finalizer is stored before an instance is launched, so that no instance outlives a
	// SimMachine deleted in between.
	if _, err := helper.EnsureFinalizer(ctx, sm, infrav1.SimMachineFinalizer); err != nil {
		return ctrl.Result{}, err
	}
	return r.reconcileNormal(ctx, sm, machine, cluster)
}

// lookupOnly reports whether a pass over sm can do no more than look up the instance its
// spec.providerID names and record what it finds: it launches and terminates nothing. Such a
// pass may end a pause in its own status write (a migration handing the SimMachine over then
// costs one write, not two); the write is locked, so it loses to a pause set meanwhile.
func lookupOnly(sm *infrav1.SimMachine) bool {
	return sm.Spec.ProviderID != "" && sm.DeletionTimestamp.IsZero() &&
		controllerutil.ContainsFinalizer(sm, infrav1.SimMachineFinalizer)
}

// ownerMachine returns the Machine owning sm; nil when there is no such owner (or it is gone).
func (r *Reconciler) ownerMachine(ctx context.Context, sm *infrav1.SimMachine) (*clusterv1.Machine, error) {
	for _, ref := range sm.OwnerReferences {
		if ref.Kind != "Machine" || ref.APIVersion != clusterv1.GroupVersion.String() {
			continue
		}
		m := &clusterv1.Machine{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: sm.Namespace, Name: ref.Name}, m)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return m, err
	}
	return nil, nil
}

// cluster returns the SimMachine's Cluster, named by its Machine or by its cluster-name
// label; nil when it does not exist.
func (r *Reconciler) cluster(ctx context.Context, sm *infrav1.SimMachine, m *clusterv1.Machine) (*clusterv1.Cluster, error) {
	name := sm.Labels[clusterv1.ClusterNameLabel]
	if m != nil && m.Spec.ClusterName != "" {
		name = m.Spec.ClusterName
	}
	return gate.Cluster(ctx, r.Client, sm.Namespace, name)
}

// terminal reports a failure retrying cannot fix: the spec (this generation of it) was
// refused by the cloud as invalid.
func terminal(sm *infrav1.SimMachine) bool {
	c := meta.FindStatusCondition(sm.Status.Conditions, infrav1.ReadyCondition)
	return c != nil && c.Reason == infrav1.InvalidConfigurationReason && c.ObservedGeneration == sm.Generation
}

func setReady(sm *infrav1.SimMachine, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&sm.Status.Conditions, metav1.Condition{Type: infrav1.ReadyCondition, Status: s, Reason: reason,
		Message: msg, ObservedGeneration: sm.Generation})
}
