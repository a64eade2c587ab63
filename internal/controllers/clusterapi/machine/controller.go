// Package machine is the Cluster API Machine controller. It follows the infrastructure
// machine contract with any provider (v1beta2 or v1beta1 contract, read as unstructured):
// it owns the bootstrap config and the InfraMachine, waits for bootstrap data, copies the
// InfraMachine's providerID, addresses and failure domain, finds the Node by providerID in
// the workload cluster and keeps the Machine-managed Node labels in sync. Deletion goes
// through pre-drain hooks, drain, volume detach, pre-terminate hooks, deletion of the
// InfraMachine and bootstrap config, and deletion of the Node, each step named in the
// Deleting condition.
package machine

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/external"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/remote"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/patch"
)

// Requeue intervals.
const (
	// WaitRequeue is how soon a Machine waiting on something it does not watch (its Node in
	// the workload cluster, a draining pod) looks again.
	WaitRequeue = 2 * time.Second
	// DefaultResync re-checks a settled Machine and its Node.
	DefaultResync = 60 * time.Second
)

// Reconciler reconciles cluster.x-k8s.io Machines.
type Reconciler struct {
	Client client.Client
	// Reader reads InfraMachines and bootstrap configs from the API server while the Machine
	// waits on their next step or the cache lacks them; otherwise they come from the cache
	// (external.Watcher.Get). The manager's client would read them live on every pass: 1.4
	// GETs per Machine in capi-scale. It defaults to the manager's API reader.
	Reader   client.Reader
	Resolver *external.Resolver
	Remote   *remote.Clients
	Recorder record.EventRecorder
	// Resync is how often a settled Machine is reconciled without events.
	Resync time.Duration
	// MaxConcurrentReconciles defaults to 10.
	MaxConcurrentReconciles int
	// NodeName is the Node this manager runs on (NodeNameEnv): the Machine whose Node it is
	// is not deleted without AllowManagerNodeDeletionAnnotation. Empty turns the protection off.
	NodeName string

	watcher *external.Watcher
}

// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;machines/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinesets;machinedeployments;machinedrainrules,verbs=get;list;watch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// SetupWithManager registers the controller. Besides Machines it watches Clusters (pause and
// unpause, infrastructure provisioned) and, as it meets them, the kinds of the InfraMachines
// and bootstrap configs it owns.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.MaxConcurrentReconciles == 0 {
		r.MaxConcurrentReconciles = 10
	}
	if r.Reader == nil {
		r.Reader = mgr.GetAPIReader()
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &clusterv1.Machine{}, providerIDIndex, machineProviderID); err != nil {
		return err
	}
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named("clusterapi-machine").
		For(&clusterv1.Machine{}).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToMachines), builder.WithPredicates(gate.ClusterChanged)).
		// Workload clusters are read without watches; a self-hosted one (the lab) also
		// reports its Nodes here, and their changes bring the Machine back at once.
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.nodeToMachine), builder.WithPredicates(gate.NodeChanged)).
		// A template change of a MachineSet or MachineDeployment changes its Machines' UpToDate.
		Watches(&clusterv1.MachineSet{}, handler.EnqueueRequestsFromMapFunc(r.ownedMachines), builder.WithPredicates(templateChanged)).
		Watches(&clusterv1.MachineDeployment{}, handler.EnqueueRequestsFromMapFunc(r.ownedMachines), builder.WithPredicates(templateChanged)).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles}).
		Build(r)
	if err != nil {
		return err
	}
	r.watcher = &external.Watcher{Controller: c, Cache: mgr.GetCache(),
		Handler: handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &clusterv1.Machine{}, handler.OnlyControllerOwner())}
	return nil
}

// providerIDIndex indexes Machines by spec.providerID in the cache.
const providerIDIndex = "spec.providerID"

func machineProviderID(o client.Object) []string {
	if m, ok := o.(*clusterv1.Machine); ok && m.Spec.ProviderID != "" {
		return []string{m.Spec.ProviderID}
	}
	return nil
}

// nodeToMachine maps a Node to its Machine: by the annotations the Machine controller puts on
// it, or, before it has (a Node just registered), by spec.providerID. Without the second, a
// Machine learnt of its new Node only at its next requeue, which waits behind every other
// Machine of a deep queue: capi-scale 5000 had hundreds of Machines whose Nodes existed
// waiting minutes for it.
func (r *Reconciler) nodeToMachine(ctx context.Context, o client.Object) []reconcile.Request {
	a := o.GetAnnotations()
	if a[MachineAnnotation] == "" || a[ClusterNamespaceAnnotation] == "" {
		node, ok := o.(*corev1.Node)
		if !ok || node.Spec.ProviderID == "" {
			return nil
		}
		var list clusterv1.MachineList
		if err := r.Client.List(ctx, &list, client.MatchingFields{providerIDIndex: node.Spec.ProviderID}); err != nil {
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return out
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: a[ClusterNamespaceAnnotation], Name: a[MachineAnnotation]}}}
}

func (r *Reconciler) clusterToMachines(ctx context.Context, o client.Object) []reconcile.Request {
	// Machines that were never reconciled (their Cluster was paused) have no cluster-name
	// label yet: match spec.clusterName too.
	var list clusterv1.MachineList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, m := range list.Items {
		if m.Spec.ClusterName == o.GetName() || m.Labels[clusterv1.ClusterNameLabel] == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: m.Namespace, Name: m.Name}})
		}
	}
	return out
}

// Reconcile is one pass over a Machine: paused gate, finalizer, then the normal or deletion
// steps. Every change to the Machine is persisted at the end: one patch for metadata and
// spec, one for status, each only when something changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	m := &clusterv1.Machine{}
	if err := r.Client.Get(ctx, req.NamespacedName, m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	helper := patch.NewHelper(m, r.Client)
	defer func() {
		m.Status.ObservedGeneration = m.Generation
		// The status is computed for the spec this pass writes (spec.providerID): it is
		// stored with the generation that write produces, in the same status patch.
		helper.Finish(ctx, m, &res, &retErr, patch.OwnSpecChange)
	}()

	cluster, err := gate.Cluster(ctx, r.Client, m.Namespace, m.Spec.ClusterName)
	if err != nil {
		return ctrl.Result{}, err
	}
	if d, _ := gate.ClusterAPI(m, cluster, &m.Status.Conditions); d.Paused || d.Resumed && !m.DeletionTimestamp.IsZero() {
		// A resumed Machine being deleted stores the end of its pause before its deletion
		// steps act (they delete the InfraMachine, whose provider terminates the instance).
		// Otherwise a pass launches, scales and terminates nothing — it reads its references
		// and labels its Node — so the end of the pause goes out with its status, one write
		// (a handover to the Cluster API spends one fewer per Machine).
		log.FromContext(ctx).V(1).Info("not reconciling", "reason", d.Message, "resumed", d.Resumed)
		return ctrl.Result{}, nil
	}
	if !m.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, m, cluster)
	}
	if cluster == nil {
		setCondition(m, clusterv1.MachineInfrastructureReadyCondition, "False", clusterv1.MachineInfrastructureInternalErrorReason,
			fmt.Sprintf("Cluster %s does not exist", m.Spec.ClusterName))
		return ctrl.Result{RequeueAfter: WaitRequeue}, nil
	}
	// Machines from a MachineSet are born with the finalizer and the cluster link. Others get
	// them here, both stored by the one write that stores the finalizer.
	ensureClusterLink(m, cluster)
	if _, err := helper.EnsureFinalizer(ctx, m, clusterv1.MachineFinalizer); err != nil {
		return ctrl.Result{}, err
	}
	return r.reconcileNormal(ctx, m, cluster)
}

// ensureClusterLink sets the cluster-name label and, when the Machine has no other owner,
// an owner reference to its Cluster.
func ensureClusterLink(m *clusterv1.Machine, cluster *clusterv1.Cluster) {
	if m.Labels[clusterv1.ClusterNameLabel] != cluster.Name {
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		m.Labels[clusterv1.ClusterNameLabel] = cluster.Name
	}
	if len(m.OwnerReferences) == 0 {
		gvk := clusterv1.GroupVersion.WithKind("Cluster")
		m.OwnerReferences = append(m.OwnerReferences, metaOwnerRef(gvk.GroupVersion().String(), gvk.Kind, cluster.Name, cluster.UID))
	}
}
