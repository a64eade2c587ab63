// Package machinepool is the Cluster API MachinePool controller. A MachinePool asks an
// infrastructure provider's InfraMachinePool (a cloud scaling group, say) for spec.replicas
// instances booted from the pool's shared bootstrap data. The controller owns the
// InfraMachinePool, copies its providerIDList and replica count, finds the pool's Nodes in
// the workload cluster and reports ready and available replicas.
//
// MachinePool Machines are opt-in: when the InfraMachinePool reports
// status.infrastructureMachineKind, the provider keeps one InfraMachine of that kind per
// instance, labelled with the cluster and pool names, and this controller gives each of them
// a Machine (controlled by the MachinePool, infrastructureRef to the InfraMachine, no
// bootstrap of its own). Those Machines are ordinary Machines from then on: the Machine
// controller owns their InfraMachines, drains on deletion, and health checks select them by
// label. Deleting Machines (scale down, replacement) is the provider's business.
package machinepool

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/labels/format"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/external"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/setctl"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/remote"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/patch"
)

// Requeue intervals.
const (
	// WaitRequeue is how soon a pool that is still converging looks again.
	WaitRequeue = 2 * time.Second
	// DefaultResync re-checks a settled pool (its Nodes are read without a watch).
	DefaultResync = 60 * time.Second
)

// Condition types of a MachinePool beyond the shared ones.
const (
	InfrastructureReadyCondition  = "InfrastructureReady"
	BootstrapConfigReadyCondition = "BootstrapConfigReady"
	MachinesCreatedCondition      = "MachinesCreated"
	AvailableCondition            = "Available"
)

// Reconciler reconciles cluster.x-k8s.io MachinePools.
type Reconciler struct {
	Client   client.Client
	Resolver *external.Resolver
	Remote   *remote.Clients
	Recorder record.EventRecorder
	Resync   time.Duration

	poolWatcher    *external.Watcher // InfraMachinePools, mapped to their controller
	machineWatcher *external.Watcher // InfraMachines of infrastructureMachineKind, mapped by label
}

// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinepools;machinepools/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch;create;update;patch

// SetupWithManager registers the controller: MachinePools, their Machines (by the pool-name
// label), Clusters, and provider kinds as they are met.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named("clusterapi-machinepool").
		For(&clusterv1.MachinePool{}).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(r.labelledToPool)).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToPools), builder.WithPredicates(gate.ClusterChanged)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 5}).
		Build(r)
	if err != nil {
		return err
	}
	r.poolWatcher = &external.Watcher{Controller: c, Cache: mgr.GetCache(),
		Handler: handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &clusterv1.MachinePool{}, handler.OnlyControllerOwner())}
	r.machineWatcher = &external.Watcher{Controller: c, Cache: mgr.GetCache(),
		Handler: handler.EnqueueRequestsFromMapFunc(r.labelledToPool)}
	return nil
}

// labelledToPool maps an object carrying the pool-name and cluster-name labels to the
// MachinePool they name.
func (r *Reconciler) labelledToPool(ctx context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	value, cluster := l[clusterv1.MachinePoolNameLabel], l[clusterv1.ClusterNameLabel]
	if value == "" {
		return nil
	}
	// A name too long for a label value is hashed (Cluster API's util/labels/format); a
	// name cannot contain "_", so only a hash starts with "hash_".
	if !strings.HasPrefix(value, "hash_") {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: value}}}
	}
	var list clusterv1.MachinePoolList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, mp := range list.Items {
		if format.MustEqualValue(mp.Name, value) && (cluster == "" || mp.Spec.ClusterName == cluster) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: mp.Namespace, Name: mp.Name}})
		}
	}
	return out
}

func (r *Reconciler) clusterToPools(ctx context.Context, o client.Object) []reconcile.Request {
	var list clusterv1.MachinePoolList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, mp := range list.Items {
		if mp.Spec.ClusterName == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: mp.Namespace, Name: mp.Name}})
		}
	}
	return out
}

// Reconcile is one pass over a MachinePool; every change to it is written by one patch at
// the end.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	mp := &clusterv1.MachinePool{}
	if err := r.Client.Get(ctx, req.NamespacedName, mp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	helper := patch.NewHelper(mp, r.Client)
	defer func() {
		mp.Status.ObservedGeneration = mp.Generation
		helper.Finish(ctx, mp, &res, &retErr)
	}()

	cluster, err := gate.Cluster(ctx, r.Client, mp.Namespace, mp.Spec.ClusterName)
	if err != nil {
		return ctrl.Result{}, err
	}
	if d, _ := gate.ClusterAPI(mp, cluster, &mp.Status.Conditions); d.Paused {
		log.FromContext(ctx).V(1).Info("not reconciling", "reason", d.Message)
		return ctrl.Result{}, nil
	}
	if !mp.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, mp)
	}
	if cluster == nil {
		setCondition(mp, InfrastructureReadyCondition, metav1.ConditionFalse, "ClusterDoesNotExist",
			fmt.Sprintf("Cluster %s does not exist", mp.Spec.ClusterName))
		return ctrl.Result{RequeueAfter: WaitRequeue}, nil
	}
	setctl.LinkCluster(mp, cluster)
	if _, err := helper.EnsureFinalizer(ctx, mp, clusterv1.MachinePoolFinalizer); err != nil {
		return ctrl.Result{}, err
	}
	return r.reconcileNormal(ctx, mp, cluster)
}

// reconcileDelete deletes the InfraMachinePool (which takes the pool's instances and
// MachinePool Machines with it) and the bootstrap config, then lets the pool go. Machines
// left behind are collected by the garbage collector through their owner reference.
func (r *Reconciler) reconcileDelete(ctx context.Context, mp *clusterv1.MachinePool) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(mp, clusterv1.MachinePoolFinalizer) {
		return ctrl.Result{}, nil
	}
	mp.Status.Phase = string(clusterv1.MachinePoolPhaseDeleting)
	ref := mp.Spec.Template.Spec.InfrastructureRef
	gone := true
	if ref.IsDefined() {
		var err error
		if gone, err = r.Resolver.Delete(ctx, r.Client, ref, mp.Namespace); err != nil {
			return ctrl.Result{}, err
		}
	}
	if b := mp.Spec.Template.Spec.Bootstrap.ConfigRef; b.IsDefined() {
		bgone, err := r.Resolver.Delete(ctx, r.Client, b, mp.Namespace)
		if err != nil {
			return ctrl.Result{}, err
		}
		gone = gone && bgone
	}
	if !gone {
		setCondition(mp, InfrastructureReadyCondition, metav1.ConditionFalse, "Deleting",
			fmt.Sprintf("waiting for %s %s to be deleted", ref.Kind, ref.Name))
		return ctrl.Result{RequeueAfter: WaitRequeue}, nil
	}
	controllerutil.RemoveFinalizer(mp, clusterv1.MachinePoolFinalizer)
	return ctrl.Result{}, nil
}

func setCondition(mp *clusterv1.MachinePool, t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&mp.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg,
		ObservedGeneration: mp.Generation})
}
