// Package cluster is the Cluster API Cluster controller: it links a Cluster to its
// InfraCluster (any provider following the v1beta2 or v1beta1 contract), reports whether the
// cluster's infrastructure is provisioned, and tears a Cluster down in order: its
// MachineDeployments, MachineSets, MachinePools and Machines first, then the InfraCluster,
// then the Cluster itself.
package cluster

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/external"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/conds"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/remote"
	"github.com/machina-dev/machina/internal/controllers/internal/coalesce"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/patch"
	"github.com/machina-dev/machina/internal/requeue"
)

// Reasons of the Cluster's conditions beyond the upstream ones.
const (
	WaitingForWorkersDeletionReason        = "WaitingForWorkersDeletion"
	WaitingForInfrastructureDeletionReason = "WaitingForInfrastructureDeletion"
	NoInfrastructureReason                 = "NoInfrastructureRef"
)

// Requeue intervals.
const (
	// WaitRequeue is how soon a Cluster waiting on something it does not watch looks again.
	WaitRequeue = 2 * time.Second
	// DefaultResync re-reads a settled Cluster's InfraCluster.
	DefaultResync = 60 * time.Second
)

// Reconciler reconciles cluster.x-k8s.io Clusters.
type Reconciler struct {
	Client client.Client
	// Reader reads from the API server an InfraCluster the cache does not hold yet
	// (external.Watcher.Get). It defaults to the manager's API reader.
	Reader   client.Reader
	Resolver *external.Resolver
	Recorder record.EventRecorder
	Resync   time.Duration
	// Remote reaches workload clusters for the RemoteConnectionProbe condition (nil: never
	// probed, the condition stays "not established yet").
	Remote *remote.Clients

	watcher *external.Watcher
	probes  prober
	writes  coalesce.StatusThrottle
	pace    coalesce.Pacer
}

// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;clusters/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;machinesets;machinedeployments;machinepools,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch

// SetupWithManager registers the controller. Descendants (Machines and their sets and pools)
// bring their Cluster back when they change, so deletion moves on as soon as they are gone.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.writes.Interval = StatusInterval
	if r.Reader == nil {
		r.Reader = mgr.GetAPIReader()
	}
	toCluster := descendantHandler(&r.pace)
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named("clusterapi-cluster").
		For(&clusterv1.Cluster{}).
		Watches(&clusterv1.Machine{}, toCluster).
		Watches(&clusterv1.MachineSet{}, toCluster).
		Watches(&clusterv1.MachineDeployment{}, toCluster).
		Watches(&clusterv1.MachinePool{}, toCluster).
		Build(r)
	if err != nil {
		return err
	}
	r.watcher = &external.Watcher{Controller: c, Cache: mgr.GetCache(),
		Handler: handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &clusterv1.Cluster{})}
	return nil
}

// descendantHandler brings a descendant's Cluster back: at once when the descendant comes,
// goes, starts deleting or moves between Clusters or roles; a second later, coalesced, when
// only its spec or status moved; and in both cases no sooner than the pacer allows a Cluster
// of its size. A pass lists every descendant, and while thousands of Machines come up a pass
// per Machine update, then per Machine creation, was the Cluster's largest cost (profiled).
func descendantHandler(pace *coalesce.Pacer) handler.Funcs {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	now := func(o client.Object, q queue) {
		if req, ok := clusterOf(o); ok {
			pace.Now(q, req)
		}
	}
	return handler.Funcs{
		CreateFunc:  func(_ context.Context, e event.CreateEvent, q queue) { now(e.Object, q) },
		DeleteFunc:  func(_ context.Context, e event.DeleteEvent, q queue) { now(e.Object, q) },
		GenericFunc: func(_ context.Context, e event.GenericEvent, q queue) { now(e.Object, q) },
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q queue) {
			if progressOnly(e.ObjectOld, e.ObjectNew) {
				if req, ok := clusterOf(e.ObjectNew); ok {
					pace.Later(q, req)
				}
				return
			}
			now(e.ObjectOld, q)
			now(e.ObjectNew, q)
		},
	}
}

// progressOnly: an update that leaves the descendant's labels (its Cluster, its role) and
// deletion state as they were.
func progressOnly(old, cur client.Object) bool {
	return old.GetDeletionTimestamp().IsZero() && cur.GetDeletionTimestamp().IsZero() &&
		maps.Equal(old.GetLabels(), cur.GetLabels())
}

// clusterOf names the Cluster o belongs to, by its cluster-name label.
func clusterOf(o client.Object) (reconcile.Request, bool) {
	name := o.GetLabels()[clusterv1.ClusterNameLabel]
	if name == "" {
		return reconcile.Request{}, false
	}
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}, true
}

// Reconcile is one pass over a Cluster: paused gate, then the deletion or normal steps; every
// change is persisted by one patch at the end.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	cl := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, cl); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	helper := patch.NewHelper(cl, r.Client)
	orig := cl.DeepCopy()
	defer func() {
		cl.Status.ObservedGeneration = cl.Generation
		if wait := r.holdStatus(req.NamespacedName, orig, cl); wait > 0 {
			cl.Status = *orig.Status.DeepCopy()
			if res.RequeueAfter == 0 || wait < res.RequeueAfter {
				res.RequeueAfter = wait
			}
		}
		helper.Finish(ctx, cl, &res, &retErr)
	}()

	if d, _ := gate.ClusterAPI(cl, cl, &cl.Status.Conditions); d.Paused {
		log.FromContext(ctx).V(1).Info("not reconciling", "reason", d.Message)
		return ctrl.Result{}, nil
	}
	if !cl.DeletionTimestamp.IsZero() {
		res, err := r.reconcileDelete(ctx, cl)
		r.updateStatus(ctx, cl, &res)
		if !controllerutil.ContainsFinalizer(cl, clusterv1.ClusterFinalizer) {
			r.probes.forget(req.NamespacedName)
			r.writes.Forget(req.NamespacedName)
			r.pace.Forget(req.NamespacedName)
		}
		return res, err
	}
	if _, err := helper.EnsureFinalizer(ctx, cl, clusterv1.ClusterFinalizer); err != nil {
		return ctrl.Result{}, err
	}
	setCondition(cl, clusterv1.ClusterDeletingCondition, metav1.ConditionFalse, clusterv1.ClusterNotDeletingReason, "")
	res, err := r.reconcileInfrastructure(ctx, cl)
	r.updateStatus(ctx, cl, &res)
	return res, err
}

// updateStatus computes the v1beta2 status from the Cluster's descendants: status.workers
// and status.controlPlane, the control plane, machines, workers and remediation
// conditions, RemoteConnectionProbe and, last, Available.
func (r *Reconciler) updateStatus(ctx context.Context, cl *clusterv1.Cluster, res *ctrl.Result) {
	d, err := r.listDescendants(ctx, cl)
	if err != nil {
		for _, t := range []string{clusterv1.ClusterWorkersAvailableCondition, clusterv1.ClusterWorkerMachinesReadyCondition,
			clusterv1.ClusterWorkerMachinesUpToDateCondition} {
			setCondition(cl, t, metav1.ConditionUnknown, clusterv1.ClusterWorkersAvailableInternalErrorReason, err.Error())
		}
		setAvailable(cl)
		return
	}
	setWorkers(cl, d)
	cp := r.reconcileControlPlaneStatus(ctx, cl, d)
	setMachinesConditions(cl, d)
	setWorkerConditions(cl, d, cp)
	setRemediating(cl, d)
	if cl.DeletionTimestamp.IsZero() {
		if next := r.probe(ctx, cl); next > 0 && (res.RequeueAfter == 0 || next < res.RequeueAfter) {
			res.RequeueAfter = next
		}
	}
	setAvailable(cl)
}

// reconcileInfrastructure owns the InfraCluster and mirrors its state.
func (r *Reconciler) reconcileInfrastructure(ctx context.Context, cl *clusterv1.Cluster) (ctrl.Result, error) {
	ref := cl.Spec.InfrastructureRef
	if !ref.IsDefined() {
		// A Cluster without infrastructure (its Machines bring their own) is provisioned.
		cl.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
		setCondition(cl, clusterv1.ClusterInfrastructureReadyCondition, metav1.ConditionTrue, NoInfrastructureReason,
			"the Cluster has no spec.infrastructureRef")
		r.setPhase(cl, clusterv1.ClusterPhaseProvisioned)
		return ctrl.Result{}, nil
	}
	if ptr.Deref(cl.Status.Initialization.InfrastructureProvisioned, false) {
		r.setPhase(cl, clusterv1.ClusterPhaseProvisioned)
	} else {
		r.setPhase(cl, clusterv1.ClusterPhaseProvisioning)
	}
	infra, err := r.watcher.Get(ctx, r.Resolver, r.Reader, ref, cl.Namespace, !ptr.Deref(cl.Status.Initialization.InfrastructureProvisioned, false))
	switch {
	case apierrors.IsNotFound(err):
		setCondition(cl, clusterv1.ClusterInfrastructureReadyCondition, metav1.ConditionFalse,
			clusterv1.ClusterInfrastructureDoesNotExistReason, fmt.Sprintf("%s %s does not exist", ref.Kind, ref.Name))
		return ctrl.Result{RequeueAfter: WaitRequeue}, nil
	case err != nil:
		setCondition(cl, clusterv1.ClusterInfrastructureReadyCondition, metav1.ConditionUnknown,
			clusterv1.ClusterInfrastructureInternalErrorReason, err.Error())
		return ctrl.Result{}, err
	}
	if err := external.EnsureOwned(ctx, r.Client, infra, cl, false, ""); err != nil {
		return ctrl.Result{}, err
	}

	provisioned := infra.Provisioned("provisioned")
	if provisioned && !ptr.Deref(cl.Status.Initialization.InfrastructureProvisioned, false) {
		cl.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
		events.Eventf(r.Recorder, cl, corev1.EventTypeNormal, "InfrastructureProvisioned", "%s %s is provisioned", ref.Kind, ref.Name)
		r.setPhase(cl, clusterv1.ClusterPhaseProvisioned)
	}
	if fds := failureDomains(infra); fds != nil {
		cl.Status.FailureDomains = fds
	}
	if !cl.Spec.ControlPlaneEndpoint.IsValid() {
		host := infra.String("spec", "controlPlaneEndpoint", "host")
		port, _, _ := nestedInt(infra, "spec", "controlPlaneEndpoint", "port")
		if host != "" && port > 0 {
			cl.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: host, Port: int32(port)}
		}
	}
	mirrorReady(cl, infra, provisioned)
	return ctrl.Result{RequeueAfter: requeue.After(r.Resync, DefaultResync)}, nil
}

// mirrorReady sets InfrastructureReady from the InfraCluster's Ready condition, or from its
// provisioned flag when it reports no condition.
func mirrorReady(cl *clusterv1.Cluster, infra *external.Object, provisioned bool) {
	fallback := conditions.FallbackCondition{Status: metav1.ConditionTrue, Reason: clusterv1.ClusterInfrastructureReadyReason}
	if !provisioned {
		fallback = conditions.FallbackCondition{Status: metav1.ConditionFalse, Reason: clusterv1.ClusterInfrastructureNotReadyReason,
			Message: fmt.Sprintf("%s %s is not provisioned yet", infra.GetKind(), infra.GetName())}
	}
	conditions.Set(cl, conds.Mirror(infra.Condition(clusterv1.ReadyCondition), clusterv1.ReadyCondition,
		clusterv1.ClusterInfrastructureReadyCondition, clusterv1.ClusterInfrastructureReadyReason, clusterv1.ClusterInfrastructureNotReadyReason, fallback))
}

func (r *Reconciler) setPhase(cl *clusterv1.Cluster, p clusterv1.ClusterPhase) {
	if cl.Status.Phase == string(p) {
		return
	}
	cl.Status.Phase = string(p)
	events.Eventf(r.Recorder, cl, corev1.EventTypeNormal, "Phase"+string(p), "Cluster %s is %s", cl.Name, p)
}

// setCondition sets a condition with the library, which stamps the observed generation,
// keeps the last transition time while the status holds and orders the list as upstream.
func setCondition(cl *clusterv1.Cluster, t string, s metav1.ConditionStatus, reason, msg string) {
	conditions.Set(cl, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg})
}
