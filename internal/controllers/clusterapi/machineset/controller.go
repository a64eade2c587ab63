// Package machineset is the Cluster API (cluster.x-k8s.io/v1beta2) MachineSet controller. It
// keeps spec.replicas Machines matching the selector: each new Machine gets its own
// InfraMachine (and bootstrap config, when the template names one) cloned from the
// template's referenced templates; orphans that match are adopted; scale-down picks victims
// by spec.deletion.order with cluster.x-k8s.io/delete-machine first. It performs the owner
// remediation a MachineHealthCheck asks for (OwnerRemediated=False on a Machine), reports
// replicas, readyReplicas, availableReplicas and upToDateReplicas with v1beta2 conditions,
// and its finalizer deletes every Machine before the MachineSet goes.
//
// A template change never rolls existing Machines: they stay, and only Machines created
// afterwards (on scale-up or to replace a deleted one) use the new template;
// status.upToDateReplicas says how many match it. The template's labels, annotations,
// minReadySeconds and deletion timeouts are changed in place on the existing Machines
// (package inplace).
package machineset

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/external"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/inplace"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/setctl"
	"github.com/machina-dev/machina/internal/controllers/internal/coalesce"
	"github.com/machina-dev/machina/internal/controllers/internal/ownedby"
	"github.com/machina-dev/machina/internal/controllers/internal/provisioncap"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/patch"
)

// StatusInterval is the shortest time between two status-only writes of one MachineSet:
// while hundreds of Machines come up, their counts are written about once a second instead
// of once per Machine event. Spec, metadata and condition status changes are not delayed.
const StatusInterval = time.Second

// Reconciler reconciles cluster.x-k8s.io MachineSets.
type Reconciler struct {
	Client client.Client
	// Cache reads provider objects from the informer cache (the manager's client reads
	// unstructured objects from the API server); Reader reads from the API server. They
	// default to the manager's cache and API reader.
	Cache    client.Reader
	Reader   client.Reader
	Resolver *external.Resolver
	Recorder record.EventRecorder
	// MaxConcurrentReconciles defaults to 5.
	MaxConcurrentReconciles int

	expect *expectations

	throttle    coalesce.StatusThrottle
	pace        coalesce.Pacer
	seen        clonesSeen
	initialised sync.Once
}

// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinesets;machinesets/status;machinesets/finalizers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;machines/status,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

func (r *Reconciler) init() {
	r.initialised.Do(func() {
		r.expect = newExpectations()
		r.throttle.Interval = StatusInterval
	})
}

// SetupWithManager registers the controller: MachineSets, their Machines (and orphans that
// match), and Clusters (pause and unpause).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.init()
	if r.MaxConcurrentReconciles == 0 {
		r.MaxConcurrentReconciles = 5
	}
	if r.Cache == nil {
		r.Cache = mgr.GetCache()
	}
	if r.Reader == nil {
		r.Reader = mgr.GetAPIReader()
	}
	if err := ownedby.Index(context.Background(), mgr.GetFieldIndexer(), &clusterv1.Machine{}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("clusterapi-machineset").
		For(&clusterv1.MachineSet{}).
		Watches(&clusterv1.Machine{}, r.machineHandler()).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToSets), builder.WithPredicates(gate.ClusterChanged)).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles}).
		Complete(r)
}

// machineHandler enqueues a Machine's MachineSet(s) and counts the events the expectations
// wait for.
func (r *Reconciler) machineHandler() handler.TypedEventHandler[client.Object, reconcile.Request] {
	enqueue := func(ctx context.Context, o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, req := range r.machineToSets(ctx, o) {
			q.Add(req)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if key, ok := setOf(e.Object); ok {
				r.expect.observeCreate(key, e.Object.GetName())
			}
			enqueue(ctx, e.Object, q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if key, ok := setOf(e.ObjectNew); ok && e.ObjectNew.GetDeletionTimestamp() != nil {
				r.expect.observeDelete(key, e.ObjectNew.GetName())
			}
			if coalesce.StatusOnly(e.ObjectOld, e.ObjectNew) {
				// A Machine's progress (status, providerID) only moves the set's counts: one
				// pass for all of them a second later, later still for a set of thousands
				// (coalesce.Pacer; a third of the manager's CPU at thousands of Machines when
				// it was a pass per event).
				for _, req := range r.machineToSets(ctx, e.ObjectNew) {
					if r.nodeForLimitedSet(ctx, req, e.ObjectOld, e.ObjectNew) {
						q.Add(req)
						continue
					}
					r.pace.Later(q, req)
				}
				return
			}
			enqueue(ctx, e.ObjectNew, q)
			ro, rn := metav1.GetControllerOf(e.ObjectOld), metav1.GetControllerOf(e.ObjectNew)
			if (ro == nil) != (rn == nil) || (ro != nil && ro.UID != rn.UID) {
				enqueue(ctx, e.ObjectOld, q)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if key, ok := setOf(e.Object); ok {
				r.expect.observeDelete(key, e.Object.GetName())
			}
			enqueue(ctx, e.Object, q)
		},
	}
}

// nodeForLimitedSet says whether the update links a Machine to its Node while its set has a
// provisioning limit: the set may create its next Machine now (provisioncap.Limited).
func (r *Reconciler) nodeForLimitedSet(ctx context.Context, req reconcile.Request, old, cur client.Object) bool {
	o, ok1 := old.(*clusterv1.Machine)
	c, ok2 := cur.(*clusterv1.Machine)
	if !ok1 || !ok2 || o.Status.NodeRef.IsDefined() || !c.Status.NodeRef.IsDefined() {
		return false
	}
	ms := &clusterv1.MachineSet{}
	return r.Cache.Get(ctx, req.NamespacedName, ms) == nil && provisioncap.Limited(ms.Annotations)
}

// setOf names the MachineSet controlling o.
func setOf(o client.Object) (types.NamespacedName, bool) {
	ref := metav1.GetControllerOf(o)
	if ref == nil || ref.Kind != "MachineSet" || ref.APIVersion != clusterv1.GroupVersion.String() {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: o.GetNamespace(), Name: ref.Name}, true
}

// machineToSets maps a Machine to its controlling MachineSet, or, for an orphan, to every
// MachineSet of its Cluster whose selector matches it.
func (r *Reconciler) machineToSets(ctx context.Context, o client.Object) []reconcile.Request {
	if key, ok := setOf(o); ok {
		return []reconcile.Request{{NamespacedName: key}}
	}
	if metav1.GetControllerOf(o) != nil {
		return nil
	}
	m, ok := o.(*clusterv1.Machine)
	if !ok {
		return nil
	}
	var sets clusterv1.MachineSetList
	if err := r.Client.List(ctx, &sets, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range sets.Items {
		if selects(&sets.Items[i], m) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&sets.Items[i])})
		}
	}
	return reqs
}

// selects reports whether the MachineSet's selector matches the Machine and both belong to
// the same Cluster.
func selects(ms *clusterv1.MachineSet, m *clusterv1.Machine) bool {
	sel, err := metav1.LabelSelectorAsSelector(&ms.Spec.Selector)
	return err == nil && !sel.Empty() && m.Spec.ClusterName == ms.Spec.ClusterName && sel.Matches(labels.Set(m.Labels))
}

func (r *Reconciler) clusterToSets(ctx context.Context, o client.Object) []reconcile.Request {
	var sets clusterv1.MachineSetList
	if err := r.Client.List(ctx, &sets, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range sets.Items {
		if sets.Items[i].Spec.ClusterName == o.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&sets.Items[i])})
		}
	}
	return reqs
}

// Reconcile is one pass over a MachineSet: paused gate, finalizer, then scaling or deletion.
// Every change to the MachineSet is persisted by one patch at the end.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	r.init()
	ms := &clusterv1.MachineSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, ms); err != nil {
		if apierrors.IsNotFound(err) {
			r.expect.forget(req.NamespacedName)
			r.throttle.Forget(req.NamespacedName)
			r.pace.Forget(req.NamespacedName)
			r.seen.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	helper := patch.NewHelper(ms, r.Client)
	before := ms.DeepCopy()
	defer func() {
		ms.Status.ObservedGeneration = ms.Generation
		r.throttle.Finish(ctx, helper, ms, statusChanged(before, ms), minorStatusChange(before, ms) && ms.DeletionTimestamp.IsZero(), &res, &retErr)
	}()

	cluster, err := gate.Cluster(ctx, r.Client, ms.Namespace, ms.Spec.ClusterName)
	if err != nil {
		return ctrl.Result{}, err
	}
	if d, _ := gate.ClusterAPI(ms, cluster, &ms.Status.Conditions); d.Paused || d.Resumed {
		// A resumed MachineSet stores the end of its pause before it scales.
		log.FromContext(ctx).V(1).Info("not reconciling", "reason", d.Message, "resumed", d.Resumed)
		return ctrl.Result{}, nil
	}
	if !ms.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, ms)
	}
	if cluster == nil {
		setCondition(ms, clusterv1.MachineSetScalingUpCondition, metav1.ConditionUnknown, clusterv1.MachineSetScalingUpInternalErrorReason,
			fmt.Sprintf("Cluster %s does not exist", ms.Spec.ClusterName))
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	setctl.LinkCluster(ms, cluster)
	// The finalizer is stored (with the cluster link) before any Machine is created.
	if _, err := helper.EnsureFinalizer(ctx, ms, clusterv1.MachineSetFinalizer); err != nil {
		return ctrl.Result{}, err
	}
	return r.reconcileNormal(ctx, ms)
}

// reconcileNormal adopts, finishes interrupted creations, remediates, scales and reports
// status.
func (r *Reconciler) reconcileNormal(ctx context.Context, ms *clusterv1.MachineSet) (ctrl.Result, error) {
	setCondition(ms, clusterv1.MachineSetDeletingCondition, metav1.ConditionFalse, clusterv1.MachineSetNotDeletingReason, "")
	if err := validate(ms); err != nil {
		setCondition(ms, clusterv1.MachineSetScalingUpCondition, metav1.ConditionUnknown, "InvalidSpec", err.Error())
		events.Eventf(r.Recorder, ms, corev1.EventTypeWarning, "InvalidSpec", "%v", err)
		return ctrl.Result{}, nil
	}
	machines, complete, err := r.ownedMachines(ctx, ms)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.pace.Passed(client.ObjectKeyFromObject(ms), len(machines))
	if !complete {
		// An orphan changed under the adoption: counting without it would create a Machine
		// too many (and delete one again once it is adopted).
		return ctrl.Result{RequeueAfter: patch.ConflictRetry}, nil
	}
	var errs []error
	var scaleErr error
	var recheck time.Duration
	key := client.ObjectKeyFromObject(ms)
	// The template's labels, annotations, minReadySeconds, deletion timeouts and taints reach
	// the existing Machines without replacing them.
	_, stale, err := inplace.Propagate(ctx, r.Client, machines,
		inplace.Template{Meta: ms.Spec.Template.ObjectMeta, Spec: &ms.Spec.Template.Spec, Taints: true})
	if err != nil {
		errs = append(errs, err)
	}
	if r.expect.satisfied(key) {
		// A pass killed between a Machine and its clones left it without them: finished (or
		// replaced) before anything counts on it.
		if recheck, err = r.finishCreations(ctx, ms, machines); err != nil {
			errs = append(errs, err)
		}
		if err := r.remediate(ctx, ms, machines); err != nil {
			errs = append(errs, err)
		}
		if scaleErr = r.scale(ctx, ms, machines); scaleErr != nil {
			errs = append(errs, scaleErr)
		}
	}
	next := sooner(r.updateStatus(ms, machines, scaleErr), recheck)
	if len(errs) > 0 {
		return ctrl.Result{}, kerrors.NewAggregate(errs)
	}
	if stale && (next == 0 || next > patch.ConflictRetry) {
		next = patch.ConflictRetry // a Machine changed under the propagation
	}
	return ctrl.Result{RequeueAfter: next}, nil
}

// reconcileDelete deletes every Machine of the MachineSet and lets the MachineSet go once
// they are all gone.
func (r *Reconciler) reconcileDelete(ctx context.Context, ms *clusterv1.MachineSet) (ctrl.Result, error) {
	left, err := setctl.DeleteOwned(ctx, r.Client, &clusterv1.MachineList{}, ms.Namespace, ms.UID)
	if err != nil {
		setCondition(ms, clusterv1.MachineSetDeletingCondition, metav1.ConditionTrue, clusterv1.MachineSetDeletingInternalErrorReason,
			err.Error())
		return ctrl.Result{}, err
	}
	if len(left) > 0 {
		setCondition(ms, clusterv1.MachineSetDeletingCondition, metav1.ConditionTrue, clusterv1.MachineSetDeletingReason,
			fmt.Sprintf("deleting %d Machine(s): %s", len(left), setctl.Summarise(left)))
		// Machine deletion events bring the MachineSet back.
		return ctrl.Result{}, nil
	}
	controllerutil.RemoveFinalizer(ms, clusterv1.MachineSetFinalizer)
	return ctrl.Result{}, nil
}
