// Package machineset is the Machine API MachineSet controller: it keeps spec.replicas Machines
// matching a MachineSet's selector, created from its template, adopts matching orphans,
// chooses which Machines to delete by the delete policy, and reports status (including the
// label selector that makes `kubectl scale` work through the scale subresource).
package machineset

import (
	"context"
	"maps"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/machina-dev/machina/internal/controllers/internal/coalesce"
	"github.com/machina-dev/machina/internal/controllers/internal/provisioncap"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/patch"
)

// DeleteMachineAnnotation marks a Machine to be deleted first when its MachineSet scales down.
const DeleteMachineAnnotation = "machine.openshift.io/delete-machine"

// Reconciler reconciles machine.openshift.io MachineSets.
type Reconciler struct {
	Client   client.Client
	Recorder record.EventRecorder
	// FinalizedKinds are the providerSpec kinds whose Machine API Machine controller runs in
	// this process and adds its finalizer (machinev1beta1.MachineFinalizer) in its first pass:
	// such Machines are created with it, saving that write. Machines of other kinds (another
	// process's actuator, or none) are created without it.
	FinalizedKinds []string
	expect         *expectations
	// throttle spaces the status writes that only move counts (coalesce.Delay apart).
	throttle coalesce.StatusThrottle
	pace     coalesce.Pacer
}

// +kubebuilder:rbac:groups=machine.openshift.io,resources=machinesets;machinesets/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=machine.openshift.io,resources=machines,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// SetupWithManager registers the controller: MachineSets, their Machines (and orphans that
// match), and Nodes (a Node turning Ready changes readyReplicas).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.expect = newExpectations()
	r.throttle.Interval = coalesce.Delay
	return ctrl.NewControllerManagedBy(mgr).
		Named("machineapi-machineset").
		For(&machinev1beta1.MachineSet{}).
		Watches(&machinev1beta1.Machine{}, r.machineHandler()).
		Watches(&corev1.Node{}, r.pace.MapLater(r.nodeToSets), builder.WithPredicates(gate.NodeChanged)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 5}).
		Complete(r)
}

// machineHandler enqueues a Machine's MachineSet(s) and counts the events the
// expectations wait for.
func (r *Reconciler) machineHandler() handler.TypedEventHandler[client.Object, reconcile.Request] {
	enqueue := func(ctx context.Context, o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, req := range r.machineToSets(ctx, o) {
			q.Add(req)
		}
	}
	owner := func(o client.Object) (types.NamespacedName, bool) {
		ref := metav1.GetControllerOf(o)
		if ref == nil || ref.Kind != "MachineSet" {
			return types.NamespacedName{}, false
		}
		return types.NamespacedName{Namespace: o.GetNamespace(), Name: ref.Name}, true
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if key, ok := owner(e.Object); ok {
				r.expect.observeCreate(key)
			}
			enqueue(ctx, e.Object, q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if key, ok := owner(e.ObjectNew); ok && e.ObjectNew.GetDeletionTimestamp() != nil {
				r.expect.observeDelete(key, e.ObjectNew)
			}
			if r.countsOnly(ctx, e.ObjectOld, e.ObjectNew) {
				// A Machine's progress (phase, nodeRef, the actuator's labels and annotations)
				// only moves the set's counts: one pass for all of them a second later, or
				// later still for a set of thousands (coalesce.Pacer).
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
			if !equalOwner(e.ObjectOld, e.ObjectNew) {
				enqueue(ctx, e.ObjectOld, q)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if key, ok := owner(e.Object); ok {
				r.expect.observeDelete(key, e.Object)
			}
			enqueue(ctx, e.Object, q)
		},
	}
}

// nodeForLimitedSet says whether the update links a Machine to its Node while its set has a
// provisioning limit: the set may create its next Machine now (provisioncap.Limited).
func (r *Reconciler) nodeForLimitedSet(ctx context.Context, req reconcile.Request, old, cur client.Object) bool {
	o, ok1 := old.(*machinev1beta1.Machine)
	c, ok2 := cur.(*machinev1beta1.Machine)
	if !ok1 || !ok2 || o.Status.NodeRef != nil || c.Status.NodeRef == nil {
		return false
	}
	ms := &machinev1beta1.MachineSet{}
	return r.Client.Get(ctx, req.NamespacedName, ms) == nil && provisioncap.Limited(ms.Annotations)
}

// countsOnly says whether an update of a Machine leaves what its MachineSet acts on at once
// as it was: the same controlling set, no deletion, and the set's selector matching it before
// and after. Everything else the set reads of a Machine (status, the labels that count it as
// fully labelled, the delete annotations it weighs when it next scales down) only moves its
// counts and can wait coalesce.Delay. The actuator's first write of every Machine adds
// labels and an annotation: treating it as an immediate change kept a set of thousands in a
// pass over all of them back to back through a scale-up (profiled in mapi-scale -n 3000).
func (r *Reconciler) countsOnly(ctx context.Context, old, cur client.Object) bool {
	if !coalesce.SameController(old, cur) {
		return false
	}
	rn := metav1.GetControllerOf(cur)
	if rn.Kind != "MachineSet" {
		return false
	}
	if maps.Equal(old.GetLabels(), cur.GetLabels()) {
		return true
	}
	var ms machinev1beta1.MachineSet
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: cur.GetNamespace(), Name: rn.Name}, &ms); err != nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(&ms.Spec.Selector)
	return err == nil && sel.Matches(labels.Set(old.GetLabels())) == sel.Matches(labels.Set(cur.GetLabels()))
}

func equalOwner(a, b client.Object) bool {
	ra, rb := metav1.GetControllerOf(a), metav1.GetControllerOf(b)
	return (ra == nil && rb == nil) || (ra != nil && rb != nil && ra.UID == rb.UID)
}

// machineToSets maps a Machine to its controlling MachineSet, or to every MachineSet whose
// selector matches it when it is an orphan.
func (r *Reconciler) machineToSets(ctx context.Context, o client.Object) []reconcile.Request {
	if ref := metav1.GetControllerOf(o); ref != nil {
		if ref.Kind != "MachineSet" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: ref.Name}}}
	}
	var sets machinev1beta1.MachineSetList
	if err := r.Client.List(ctx, &sets, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range sets.Items {
		if sel, err := metav1.LabelSelectorAsSelector(&sets.Items[i].Spec.Selector); err == nil && !sel.Empty() &&
			sel.Matches(labels.Set(o.GetLabels())) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&sets.Items[i])})
		}
	}
	return reqs
}

func (r *Reconciler) nodeToSets(ctx context.Context, o client.Object) []reconcile.Request {
	ns, name, ok := splitKey(o.GetAnnotations()["machine.openshift.io/machine"])
	if !ok {
		return nil
	}
	var m machinev1beta1.Machine
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &m); err != nil {
		return nil
	}
	if ref := metav1.GetControllerOf(&m); ref != nil && ref.Kind == "MachineSet" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: ref.Name}}}
	}
	return nil
}

// Reconcile brings one MachineSet's Machines to the desired count and reports status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	ms := &machinev1beta1.MachineSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, ms); err != nil {
		if apierrors.IsNotFound(err) {
			r.expect.forget(req.NamespacedName)
			r.throttle.Forget(req.NamespacedName)
			r.pace.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	helper := patch.NewHelper(ms, r.Client)
	before := ms.DeepCopy()
	defer func() {
		r.throttle.Finish(ctx, helper, ms, !equality.Semantic.DeepEqual(before.Status, ms.Status), minorStatusChange(before, ms), &res, &retErr)
	}()

	decision, _, err := gate.MachineAPI(ms)
	if err != nil || decision.Paused || decision.Resumed {
		// A resumed MachineSet stores the end of its pause before it scales.
		return ctrl.Result{}, err
	}
	if !ms.DeletionTimestamp.IsZero() {
		// Owner references let the garbage collector remove the Machines.
		return ctrl.Result{}, nil
	}
	if err := validate(ms); err != nil {
		ms.Status.ErrorReason = ptrTo(machinev1beta1.InvalidConfigurationMachineSetError)
		ms.Status.ErrorMessage = ptrTo(err.Error())
		events.Eventf(r.Recorder, ms, corev1.EventTypeWarning, "InvalidConfiguration", "%v", err)
		return ctrl.Result{}, nil
	}
	ms.Status.ErrorReason, ms.Status.ErrorMessage = nil, nil

	machines, err := r.ownedMachines(ctx, ms)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.pace.Passed(client.ObjectKeyFromObject(ms), len(machines))
	var scaleErr error
	if r.expect.satisfied(req.NamespacedName) {
		scaleErr = r.scale(ctx, ms, machines)
	}
	requeue, err := r.updateStatus(ctx, ms, machines)
	if err != nil {
		return ctrl.Result{}, err
	}
	if scaleErr != nil {
		return ctrl.Result{}, scaleErr
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}
