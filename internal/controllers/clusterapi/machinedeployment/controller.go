// Package machinedeployment is the Cluster API (cluster.x-k8s.io/v1beta2) MachineDeployment
// controller. A MachineDeployment owns MachineSets, one per machine template: the
// MachineSet whose template matches the MachineDeployment's (ignoring the fields Cluster API
// propagates in place) is the new one, named <md>-<hash> and labelled machine-template-hash
// with that hash; every other one is old. A template change (or spec.rollout.after passing)
// makes a new MachineSet, and the strategy moves the replicas over: RollingUpdate within
// maxSurge and maxUnavailable, OnDelete as the user deletes old Machines. Old MachineSets
// without Machines are deleted (v1beta2 has no revision history limit); each MachineSet
// records its rollout sequence in the revision annotation.
package machinedeployment

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/setctl"
	"github.com/machina-dev/machina/internal/controllers/internal/coalesce"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/patch"
)

// StatusInterval is the shortest time between two status writes of one MachineDeployment
// that only change counts or messages (see the MachineSet controller's).
const StatusInterval = time.Second

// Reconciler reconciles cluster.x-k8s.io MachineDeployments.
type Reconciler struct {
	Client   client.Client
	Recorder record.EventRecorder
	// MaxConcurrentReconciles defaults to 5.
	MaxConcurrentReconciles int

	throttle coalesce.StatusThrottle
}

// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinedeployments;machinedeployments/status;machinedeployments/finalizers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinesets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// SetupWithManager registers the controller: MachineDeployments, their MachineSets (and
// orphans that match), the Machines of those MachineSets, and Clusters (pause and unpause).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.MaxConcurrentReconciles == 0 {
		r.MaxConcurrentReconciles = 5
	}
	r.throttle.Interval = StatusInterval
	return ctrl.NewControllerManagedBy(mgr).
		Named("clusterapi-machinedeployment").
		For(&clusterv1.MachineDeployment{}).
		Watches(&clusterv1.MachineSet{}, handler.EnqueueRequestsFromMapFunc(r.setToDeployments)).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(r.machineToDeployment)).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToDeployments), builder.WithPredicates(gate.ClusterChanged)).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles}).
		Complete(r)
}

// deploymentOf names the MachineDeployment controlling o.
func deploymentOf(o client.Object) (types.NamespacedName, bool) {
	ref := metav1.GetControllerOf(o)
	if ref == nil || ref.Kind != "MachineDeployment" || ref.APIVersion != clusterv1.GroupVersion.String() {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: o.GetNamespace(), Name: ref.Name}, true
}

// setToDeployments maps a MachineSet to its MachineDeployment or, for an orphan, to every
// MachineDeployment of its Cluster whose selector matches it.
func (r *Reconciler) setToDeployments(ctx context.Context, o client.Object) []reconcile.Request {
	if key, ok := deploymentOf(o); ok {
		return []reconcile.Request{{NamespacedName: key}}
	}
	ms, ok := o.(*clusterv1.MachineSet)
	if !ok || metav1.GetControllerOf(o) != nil {
		return nil
	}
	var mds clusterv1.MachineDeploymentList
	if err := r.Client.List(ctx, &mds, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range mds.Items {
		if selects(&mds.Items[i], ms) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&mds.Items[i])})
		}
	}
	return reqs
}

// machineToDeployment maps a Machine to the MachineDeployment of its MachineSet.
func (r *Reconciler) machineToDeployment(ctx context.Context, o client.Object) []reconcile.Request {
	ref := metav1.GetControllerOf(o)
	if ref == nil || ref.Kind != "MachineSet" || ref.APIVersion != clusterv1.GroupVersion.String() {
		return nil
	}
	ms := &clusterv1.MachineSet{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: ref.Name}, ms); err != nil {
		return nil
	}
	if key, ok := deploymentOf(ms); ok {
		return []reconcile.Request{{NamespacedName: key}}
	}
	return nil
}

func (r *Reconciler) clusterToDeployments(ctx context.Context, o client.Object) []reconcile.Request {
	var mds clusterv1.MachineDeploymentList
	if err := r.Client.List(ctx, &mds, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range mds.Items {
		if mds.Items[i].Spec.ClusterName == o.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&mds.Items[i])})
		}
	}
	return reqs
}

// selects reports whether the MachineDeployment's selector matches the MachineSet's labels
// and both belong to the same Cluster.
func selects(md *clusterv1.MachineDeployment, ms *clusterv1.MachineSet) bool {
	sel, err := metav1.LabelSelectorAsSelector(&md.Spec.Selector)
	return err == nil && !sel.Empty() && ms.Spec.ClusterName == md.Spec.ClusterName && sel.Matches(labels.Set(ms.Labels))
}

// Reconcile is one pass over a MachineDeployment: paused gate, finalizer, then the rollout
// or the deletion. Every change to the MachineDeployment is persisted by one patch at the end.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	md := &clusterv1.MachineDeployment{}
	if err := r.Client.Get(ctx, req.NamespacedName, md); err != nil {
		if apierrors.IsNotFound(err) {
			r.throttle.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	helper := patch.NewHelper(md, r.Client)
	before := md.DeepCopy()
	defer func() {
		md.Status.ObservedGeneration = md.Generation
		r.throttle.Finish(ctx, helper, md, statusChanged(before, md), minorStatusChange(before, md) && md.DeletionTimestamp.IsZero(), &res, &retErr)
	}()

	cluster := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: md.Namespace, Name: md.Spec.ClusterName}, cluster); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		cluster = nil
	}
	if d, _ := gate.ClusterAPI(md, cluster, &md.Status.Conditions); d.Paused {
		log.FromContext(ctx).V(1).Info("not reconciling", "reason", d.Message)
		return ctrl.Result{}, nil
	}
	if !md.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, md)
	}
	if cluster == nil {
		setCondition(md, clusterv1.MachineDeploymentScalingUpCondition, metav1.ConditionUnknown,
			clusterv1.MachineDeploymentScalingUpInternalErrorReason, fmt.Sprintf("Cluster %s does not exist", md.Spec.ClusterName))
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	setctl.LinkCluster(md, cluster)
	// The finalizer is stored (with the cluster link) before any MachineSet is created.
	if _, err := helper.EnsureFinalizer(ctx, md, clusterv1.MachineDeploymentFinalizer); err != nil {
		return ctrl.Result{}, err
	}
	return r.reconcileNormal(ctx, md)
}

// reconcileNormal finds (or makes) the new MachineSet, moves replicas by the strategy,
// cleans up empty old MachineSets and reports status.
func (r *Reconciler) reconcileNormal(ctx context.Context, md *clusterv1.MachineDeployment) (ctrl.Result, error) {
	setCondition(md, clusterv1.MachineDeploymentDeletingCondition, metav1.ConditionFalse, clusterv1.MachineDeploymentNotDeletingReason, "")
	sets, err := r.load(ctx, md)
	if err != nil {
		return ctrl.Result{}, err
	}
	strat, err := validate(md)
	if err != nil {
		updateStatus(md, sets, strategy{}, nil)
		setCondition(md, clusterv1.MachineDeploymentScalingUpCondition, metav1.ConditionUnknown, invalidSpecReason, err.Error())
		events.Eventf(r.Recorder, md, corev1.EventTypeWarning, invalidSpecReason, "%v", err)
		return ctrl.Result{}, nil
	}
	next, err := r.rollout(ctx, md, sets, strat)
	if apierrors.IsConflict(err) {
		// A MachineSet or Machine changed under this pass (its controller writes status
		// often): look again on fresh data, without counting it as a failure.
		updateStatus(md, sets, strat, nil)
		return ctrl.Result{RequeueAfter: patch.ConflictRetry}, nil
	}
	updateStatus(md, sets, strat, err)
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: next}, nil
}

// reconcileDelete deletes every MachineSet of the MachineDeployment and lets it go once
// they are all gone.
func (r *Reconciler) reconcileDelete(ctx context.Context, md *clusterv1.MachineDeployment) (ctrl.Result, error) {
	left, err := setctl.DeleteOwned(ctx, r.Client, &clusterv1.MachineSetList{}, md.Namespace, md.UID)
	if err != nil {
		setCondition(md, clusterv1.MachineDeploymentDeletingCondition, metav1.ConditionTrue,
			clusterv1.MachineDeploymentDeletingInternalErrorReason, err.Error())
		return ctrl.Result{}, err
	}
	if len(left) > 0 {
		setCondition(md, clusterv1.MachineDeploymentDeletingCondition, metav1.ConditionTrue, clusterv1.MachineDeploymentDeletingReason,
			fmt.Sprintf("deleting %d MachineSet(s): %s", len(left), setctl.Summarise(left)))
		// MachineSet deletion events bring the MachineDeployment back.
		return ctrl.Result{}, nil
	}
	controllerutil.RemoveFinalizer(md, clusterv1.MachineDeploymentFinalizer)
	return ctrl.Result{}, nil
}
