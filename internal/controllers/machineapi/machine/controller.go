package machine

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/cluster-api/util"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/patch"
	"github.com/machina-dev/machina/internal/provider"
)

// Annotations the controller reads or writes.
const (
	// InstanceStateAnnotation mirrors the cloud's state of the Machine's instance.
	InstanceStateAnnotation = "machine.openshift.io/instance-state"
	// UnknownInstanceState is the InstanceStateAnnotation of a Failed Machine.
	UnknownInstanceState = "Unknown"
	// ExcludeNodeDrainingAnnotation skips the drain when the Machine is deleted.
	ExcludeNodeDrainingAnnotation = "machine.openshift.io/exclude-node-draining"
	// NodeMachineAnnotation on a Node names its Machine as <namespace>/<name> (set by NodeLink).
	NodeMachineAnnotation = "machine.openshift.io/machine"
)

// Requeue intervals.
const (
	// PendingRequeue is how soon a step that waits on the cloud is tried again: an instance
	// being deleted, one found booting that this controller did not launch (pendingLook).
	PendingRequeue = 2 * time.Second
	// MaxPendingRequeue is the wait between looks at a booting instance it launched.
	MaxPendingRequeue = 20 * time.Second
	// DrainRequeue is how soon a drain that is not finished is tried again.
	DrainRequeue = 5 * time.Second
	// DefaultResync re-checks a healthy Machine's instance, so one that vanishes behind the
	// controller's back is noticed even when no event arrives (its Node turning NotReady or
	// going away brings a look at once).
	DefaultResync = 60 * time.Second
)

// Reconciler reconciles machine.openshift.io Machines.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader // uncached reads (pods by node for the drain)
	Actuator  Actuator
	Recorder  record.EventRecorder
	// Resync is how often a Machine is reconciled without events; DefaultResync when zero.
	Resync time.Duration
	// MaxConcurrentReconciles defaults to DefaultMaxConcurrentReconciles.
	MaxConcurrentReconciles int
	// ProviderSpecKinds are the providerSpec kinds the Actuator provisions; Machines of other
	// kinds are left alone (another platform's controller runs them). Empty means every kind.
	ProviderSpecKinds []string
	// looks holds the time each Machine's last pass asked to look at its instance again.
	looks looks
	// NodeName is the Node this manager runs on (NodeNameEnv): its Machine is not drained or
	// deleted without AllowManagerNodeDeletionAnnotation. Empty turns the protection off.
	NodeName string
	// Name is the controller's name, unique in the manager; "machineapi-machine" when empty
	// (a second platform's Machine controller in the same manager needs its own).
	Name string
}

// DefaultMaxConcurrentReconciles is how many Machines the controller reconciles at once by
// default (the manager's --max-concurrent-reconciles).
const DefaultMaxConcurrentReconciles = 10

// handles reports whether the Machine is of a platform this controller's Actuator serves.
func (r *Reconciler) handles(o client.Object) bool {
	m, ok := o.(*machinev1beta1.Machine)
	return ok && (len(r.ProviderSpecKinds) == 0 || slices.Contains(r.ProviderSpecKinds, provider.SpecKind(m.Spec.ProviderSpec)))
}

// +kubebuilder:rbac:groups=machine.openshift.io,resources=machines;machines/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// SetupWithManager registers the controller. Besides Machines it watches Nodes, so a Node
// that goes away or turns NotReady brings its Machine back for a look at its instance.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.MaxConcurrentReconciles == 0 {
		r.MaxConcurrentReconciles = DefaultMaxConcurrentReconciles
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(cmp.Or(r.Name, "machineapi-machine")).
		For(&machinev1beta1.Machine{}, builder.WithPredicates(predicate.NewPredicateFuncs(r.handles),
			predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return !ownEcho(e.ObjectOld, e.ObjectNew) }})).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.nodeToMachine), builder.WithPredicates(
			predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return nodeHealthChanged(e.ObjectOld, e.ObjectNew) }})).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles}).
		Complete(r)
}

// nodeHealthChanged passes the Node updates this controller looks at the instance for: the
// Node's deletion, its Ready condition leaving True, and the annotation naming its Machine
// moving to another Machine. Its other updates (coming up and turning Ready, labels, taints,
// addresses, the first link, whose Machine gets its nodeRef in the same moment, heartbeats)
// are NodeLink's and the MachineSet's business; each cost a pass and an instance lookup here
// (a Node goes through half a dozen updates as it comes up).
func nodeHealthChanged(old, cur client.Object) bool {
	o, ok1 := old.(*corev1.Node)
	n, ok2 := cur.(*corev1.Node)
	if !ok1 || !ok2 {
		return true
	}
	linked := o.Annotations[NodeMachineAnnotation]
	return !o.DeletionTimestamp.Equal(n.DeletionTimestamp) ||
		util.IsNodeReady(o) && !util.IsNodeReady(n) ||
		linked != "" && linked != n.Annotations[NodeMachineAnnotation]
}

// ownEcho says whether a Machine update leaves everything this controller acts on as it was:
// the spec but for the providerID, the metadata (labels, annotations, finalizers, owners,
// deletion) but for its own finalizer's addition and the labels and annotation the
// actuators record the instance in (outputLabels, InstanceStateAnnotation), and of the
// status the authority, the Node and the end of a pause (resumed). The rest — providerID,
// instance labels and state, phase, conditions, addresses, providerStatus — is this
// controller's own output: such an update is almost always its own write coming back, and
// a pass for it cost an instance lookup (DescribeInstances on AWS) for nothing. The resync
// and the Node watch still bring every Machine back.
func ownEcho(old, cur client.Object) bool {
	o, ok1 := old.(*machinev1beta1.Machine)
	c, ok2 := cur.(*machinev1beta1.Machine)
	if !ok1 || !ok2 || !o.DeletionTimestamp.Equal(c.DeletionTimestamp) || !sameFinalizersButOurs(o.Finalizers, c.Finalizers) ||
		!equality.Semantic.DeepEqual(o.OwnerReferences, c.OwnerReferences) ||
		o.Status.AuthoritativeAPI != c.Status.AuthoritativeAPI || !equality.Semantic.DeepEqual(o.Status.NodeRef, c.Status.NodeRef) ||
		resumed(o, c) ||
		!equalBut(o.Labels, c.Labels, outputLabels...) || !equalBut(o.Annotations, c.Annotations, InstanceStateAnnotation) {
		return false
	}
	if o.Generation == c.Generation {
		return true
	}
	os, cs := o.Spec, c.Spec // shallow copies: nothing below writes through them
	os.ProviderID, cs.ProviderID = nil, nil
	return equality.Semantic.DeepEqual(os, cs)
}

// sameFinalizersButOurs says whether cur holds old's finalizers, and at most this
// controller's added: the pass that stores it goes on to act in the same pass, so the
// finalizer coming back needs none (it cost an instance lookup per new Machine).
func sameFinalizersButOurs(old, cur []string) bool {
	if slices.Equal(old, cur) {
		return true
	}
	return !slices.Contains(old, machinev1beta1.MachineFinalizer) &&
		slices.Equal(old, slices.DeleteFunc(slices.Clone(cur), func(f string) bool { return f == machinev1beta1.MachineFinalizer }))
}

// resumed says whether the update ends the Machine's pause (Paused True, then not). A
// resumed Machine's pass stores that and ends (the end of the pause is stored before
// anything acts); the next pass, which acts, comes from that write.
func resumed(old, cur *machinev1beta1.Machine) bool {
	return mapicond.IsTrue(old.Status.Conditions, gate.PausedCondition) && !mapicond.IsTrue(cur.Status.Conditions, gate.PausedCondition)
}

// outputLabels are the Machine labels the actuators set from the instance they found.
var outputLabels = []string{"machine.openshift.io/instance-type", "machine.openshift.io/region", "machine.openshift.io/zone"}

// equalBut says whether a and b hold the same keys and values but for keys.
func equalBut(a, b map[string]string, keys ...string) bool {
	return maps.Equal(a, b) || maps.Equal(without(a, keys), without(b, keys))
}

func without(m map[string]string, keys []string) map[string]string {
	out := maps.Clone(m)
	for _, k := range keys {
		delete(out, k)
	}
	return out
}

// nodeToMachine maps a Node to the Machine its annotation names; the Machine's planned look
// is forgotten, so the pass the Node's change brings looks at the instance.
func (r *Reconciler) nodeToMachine(_ context.Context, o client.Object) []reconcile.Request {
	ns, name, ok := strings.Cut(o.GetAnnotations()[NodeMachineAnnotation], "/")
	if !ok || ns == "" || name == "" {
		return nil
	}
	key := types.NamespacedName{Namespace: ns, Name: name}
	r.looks.forget(key)
	return []reconcile.Request{{NamespacedName: key}}
}

// Reconcile is one pass over a Machine: gate, finalizer, then the normal or deletion steps.
// Every change is persisted by one patch at the end, whatever path returns.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	m := &machinev1beta1.Machine{}
	if err := r.Client.Get(ctx, req.NamespacedName, m); err != nil || !r.handles(m) {
		r.looks.drop(req.NamespacedName)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	start := time.Now()
	if wait, early := r.looks.early(m, start); early {
		return ctrl.Result{RequeueAfter: wait}, nil // a requeue a later pass superseded
	}
	defer func() { r.looks.passed(m, start, res, retErr) }() // after the patch below
	helper := patch.NewHelper(m, r.Client)
	defer helper.Finish(ctx, m, &res, &retErr)

	wasPaused := mapicond.IsTrue(m.Status.Conditions, gate.PausedCondition)
	decision, _, err := gate.MachineAPI(m)
	if err != nil {
		return ctrl.Result{}, err
	}
	if decision.Paused {
		log.FromContext(ctx).V(1).Info("not reconciling", "reason", decision.Message)
		return r.reconcilePaused(ctx, m, wasPaused)
	}
	if decision.Resumed {
		return ctrl.Result{}, nil // the end of the pause is stored before anything acts
	}
	if !m.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, m)
	}
	// The finalizer must be stored before any cloud call, so an instance never outlives
	// a Machine deleted in between; the status the gate computed is written at the end of
	// the pass, together with the provisioning results.
	wrote, err := helper.EnsureFinalizer(ctx, m, machinev1beta1.MachineFinalizer)
	if err != nil {
		return ctrl.Result{}, err
	}
	if wrote {
		if kept, err := r.finalizerKept(ctx, m); err != nil || !kept {
			return ctrl.Result{}, err
		}
	}
	return r.reconcileNormal(ctx, m)
}

// finalizerKept reads the Machine from the API server after its finalizer was stored and
// reports whether it is still there and not being deleted. A delete racing the finalizer's
// write can remove the Machine with the finalizer on (kubernetes/kubernetes#77988: the write
// is answered 200, the object is gone): an instance launched now would have nothing left to
// terminate it. Once a read shows the finalizer stored, a later delete waits for it. The
// soak found the race with the simulated provider; every actuator (AWS's too) meets it here.
func (r *Reconciler) finalizerKept(ctx context.Context, m *machinev1beta1.Machine) (bool, error) {
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(machinev1beta1.GroupVersion.WithKind("Machine"))
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(m), live); apierrors.IsNotFound(err) {
		log.FromContext(ctx).Info("the Machine was deleted as its finalizer was stored; launching nothing")
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("reading the Machine back after storing its finalizer: %w", err)
	}
	return live.DeletionTimestamp.IsZero() && controllerutil.ContainsFinalizer(live, machinev1beta1.MachineFinalizer), nil
}
