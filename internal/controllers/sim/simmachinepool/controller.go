// Package simmachinepool is the simulated provider's SimMachinePool controller: the
// InfraMachinePool of a Cluster API MachinePool, backed by a scaling group of the simulated
// cloud. It opts in to MachinePool Machines (status.infrastructureMachineKind=SimMachine) and
// keeps one SimMachine per group member, which adopts the member by spec.providerID.
//
// The group never shrinks on its own initiative: the group's scale-in is not drain-aware,
// so the controller picks the replica to remove (one whose Machine has
// cluster.x-k8s.io/delete-machine first), puts a pre-terminate hook on its Machine and
// deletes the Machine. Once the Machine controller has drained the Node and reached the
// hook, the controller terminates the instance through the group — shrinking it when the
// group is larger than wanted, else letting the group replace it — and releases the hook.
// A Machine deleted by hand (or by a health check) terminates its instance directly and the
// group replaces it. A member that vanishes leaves a dangling Machine and SimMachine, which
// are deleted; the group launches the replacement.
//
// Template changes roll out through the same path: the group's launch template is updated,
// the group surges by up to maxSurge, and outdated replicas are removed only while the
// ready replicas exceed the desired count.
//
// In ScaleOnly mode the group only changes size: Machines are shown for each instance, but
// carry the ScaleOnlyLabel, for which an admission policy refuses their deletion.
package simmachinepool

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	cloudclient "github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/patch"
)

// Labels, annotations and tags of the controller.
const (
	// PoolLabel names the SimMachinePool on each of its SimMachines.
	PoolLabel = "infrastructure.machina.dev/simmachinepool"
	// ScaleOnlyLabel marks the Machines of a ScaleOnly pool; deleting them is refused by the
	// machina-machinepool-scale-only admission policy.
	ScaleOnlyLabel = "infrastructure.machina.dev/scale-only"
	// HookAnnotation is the pre-terminate hook put on a Machine the pool removes, so the
	// instance is terminated through the group once the Node is drained.
	HookAnnotation = clusterv1.PreTerminateDeleteHookAnnotationPrefix + "/simmachinepool"
	// HookOwner is the hook annotation's value.
	HookOwner = "infrastructure.machina.dev/simmachinepool"
	// TagPool is the group tag naming the SimMachinePool (namespace/name).
	TagPool = "machina.dev/simmachinepool"
	// TagCluster is the group tag naming the Cluster (namespace/name).
	TagCluster = "machina.dev/cluster"
)

// Reasons of the Ready condition beyond the shared ones.
const (
	WaitingForMachinePoolReason = "WaitingForMachinePool"
	ScalingReason               = "Scaling"
	RollingUpdateReason         = "RollingUpdate"
	GroupReadyReason            = "ScalingGroupReady"
	GroupDeletingReason         = "ScalingGroupDeleting"
)

// Intervals.
const (
	WaitRequeue   = 2 * time.Second
	SecretRetry   = 5 * time.Second
	DefaultResync = 60 * time.Second
)

// Reconciler reconciles SimMachinePools.
type Reconciler struct {
	Client   client.Client
	Cloud    *cloudclient.Client
	Recorder record.EventRecorder
	Resync   time.Duration

	removing sync.Map // UIDs of Machines just removed by the pool -> when
}

// +kubebuilder:rbac:groups=infrastructure.machina.dev,resources=simmachinepools;simmachinepools/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.machina.dev,resources=simmachines,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinepools;clusters,verbs=get;list;watch

// SetupWithManager registers the controller. SimMachines (by PoolLabel), the pool's Machines
// and its MachinePool bring a SimMachinePool back; the group itself is polled.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("sim-simmachinepool").
		For(&infrav1.SimMachinePool{}).
		Watches(&infrav1.SimMachine{}, handler.EnqueueRequestsFromMapFunc(simMachineToPool)).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(r.machineToPool)).
		Watches(&clusterv1.MachinePool{}, handler.EnqueueRequestsFromMapFunc(machinePoolToPool)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 5}).
		Complete(r)
}

func simMachineToPool(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[PoolLabel]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}

func machinePoolToPool(_ context.Context, o client.Object) []reconcile.Request {
	mp, ok := o.(*clusterv1.MachinePool)
	if !ok {
		return nil
	}
	ref := mp.Spec.Template.Spec.InfrastructureRef
	if ref.Kind != "SimMachinePool" || ref.APIGroup != infrav1.GroupVersion.Group {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: mp.Namespace, Name: ref.Name}}}
}

// machineToPool maps a MachinePool Machine to the pool through its MachinePool.
func (r *Reconciler) machineToPool(ctx context.Context, o client.Object) []reconcile.Request {
	ref := metav1.GetControllerOf(o)
	if ref == nil || ref.Kind != "MachinePool" {
		return nil
	}
	mp := &clusterv1.MachinePool{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: ref.Name}, mp); err != nil {
		return nil
	}
	return machinePoolToPool(ctx, mp)
}

// Reconcile is one pass over a SimMachinePool.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	smp := &infrav1.SimMachinePool{}
	if err := r.Client.Get(ctx, req.NamespacedName, smp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	helper := patch.NewHelper(smp, r.Client)
	defer helper.Finish(ctx, smp, &res, &retErr)

	mp, err := r.ownerPool(ctx, smp)
	if err != nil {
		return ctrl.Result{}, err
	}
	cluster, err := r.cluster(ctx, smp, mp)
	if err != nil {
		return ctrl.Result{}, err
	}
	if d, _ := gate.ClusterAPI(smp, cluster, &smp.Status.Conditions); d.Paused {
		log.FromContext(ctx).V(1).Info("not reconciling", "reason", d.Message)
		return ctrl.Result{}, nil
	}
	if !smp.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, smp, mp)
	}
	if mp == nil {
		setReady(smp, metav1.ConditionFalse, WaitingForMachinePoolReason, "waiting for a MachinePool to own this SimMachinePool")
		return ctrl.Result{}, nil
	}
	if cluster == nil {
		setReady(smp, metav1.ConditionFalse, infrav1.WaitingForClusterInfrastructureReason,
			fmt.Sprintf("Cluster %s does not exist", mp.Spec.ClusterName))
		return ctrl.Result{RequeueAfter: WaitRequeue}, nil
	}
	if _, err := helper.EnsureFinalizer(ctx, smp, infrav1.SimMachinePoolFinalizer); err != nil {
		return ctrl.Result{}, err
	}
	return r.reconcileNormal(ctx, smp, mp, cluster)
}

// ownerPool returns the MachinePool owning smp, nil when there is none (or it is gone).
func (r *Reconciler) ownerPool(ctx context.Context, smp *infrav1.SimMachinePool) (*clusterv1.MachinePool, error) {
	for _, ref := range smp.OwnerReferences {
		if ref.Kind != "MachinePool" || ref.APIVersion != clusterv1.GroupVersion.String() {
			continue
		}
		mp := &clusterv1.MachinePool{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: smp.Namespace, Name: ref.Name}, mp)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return mp, err
	}
	return nil, nil
}

// cluster returns the pool's Cluster, named by its MachinePool or its cluster-name label.
func (r *Reconciler) cluster(ctx context.Context, smp *infrav1.SimMachinePool, mp *clusterv1.MachinePool) (*clusterv1.Cluster, error) {
	name := smp.Labels[clusterv1.ClusterNameLabel]
	if mp != nil && mp.Spec.ClusterName != "" {
		name = mp.Spec.ClusterName
	}
	return gate.Cluster(ctx, r.Client, smp.Namespace, name)
}

func setReady(smp *infrav1.SimMachinePool, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&smp.Status.Conditions, metav1.Condition{Type: infrav1.ReadyCondition, Status: s, Reason: reason,
		Message: msg, ObservedGeneration: smp.Generation})
}
