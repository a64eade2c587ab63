// Package simcluster is the simulated provider's SimCluster controller: it creates the
// cluster's network in the simulated cloud (idempotently, with the SimCluster's UID as the
// client token), reports the region's zones as failure domains, and removes the network when
// the SimCluster is deleted.
package simcluster

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/api"
	cloudclient "github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/patch"
	"github.com/machina-dev/machina/internal/requeue"
)

// Tags put on the networks the controller creates.
const (
	TagSimClusterUID = "machina.dev/simcluster-uid"
	TagCluster       = "machina.dev/cluster"
)

// Reasons of the Ready condition beyond the shared ones.
const (
	WaitingForClusterOwnerReason = "WaitingForClusterOwner"
	NetworkReadyReason           = "NetworkReady"
	DeletingNetworkReason        = "DeletingNetwork"
)

// Retry intervals.
const (
	CloudRetry    = 10 * time.Second
	DependentWait = 2 * time.Second
	DefaultResync = 5 * time.Minute
)

// Reconciler reconciles SimClusters.
type Reconciler struct {
	Client   client.Client
	Cloud    *cloudclient.Client
	Recorder record.EventRecorder
	Resync   time.Duration
}

// +kubebuilder:rbac:groups=infrastructure.machina.dev,resources=simclusters;simclusters/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch

// SetupWithManager registers the controller; a Cluster's changes (paused, owner) bring its
// SimCluster back.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("sim-simcluster").
		For(&infrav1.SimCluster{}).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(clusterToSimCluster), builder.WithPredicates(gate.ClusterChanged)).
		Complete(r)
}

func clusterToSimCluster(_ context.Context, o client.Object) []reconcile.Request {
	cl, ok := o.(*clusterv1.Cluster)
	if !ok || cl.Spec.InfrastructureRef.Kind != "SimCluster" || cl.Spec.InfrastructureRef.APIGroup != infrav1.GroupVersion.Group {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: cl.Namespace, Name: cl.Spec.InfrastructureRef.Name}}}
}

// Reconcile is one pass over a SimCluster.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	sc := &infrav1.SimCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, sc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	helper := patch.NewHelper(sc, r.Client)
	defer helper.Finish(ctx, sc, &res, &retErr)

	cluster, owned, err := r.ownerCluster(ctx, sc)
	if err != nil {
		return ctrl.Result{}, err
	}
	if d, _ := gate.ClusterAPI(sc, cluster, &sc.Status.Conditions); d.Paused {
		log.FromContext(ctx).V(1).Info("not reconciling", "reason", d.Message)
		return ctrl.Result{}, nil
	}
	if !sc.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, sc)
	}
	if cluster == nil || !owned {
		setReady(sc, metav1.ConditionFalse, WaitingForClusterOwnerReason, "waiting for a Cluster to own this SimCluster")
		return ctrl.Result{}, nil
	}
	if _, err := helper.EnsureFinalizer(ctx, sc, infrav1.SimClusterFinalizer); err != nil {
		return ctrl.Result{}, err
	}
	return r.reconcileNormal(ctx, sc, cluster)
}

// ownerCluster returns the SimCluster's Cluster, named by its owner reference or, before the
// Cluster controller set that, by the cluster-name label (so a paused Cluster pauses its
// SimCluster from the start). owned says whether the Cluster is an owner.
func (r *Reconciler) ownerCluster(ctx context.Context, sc *infrav1.SimCluster) (cl *clusterv1.Cluster, owned bool, err error) {
	name := sc.Labels[clusterv1.ClusterNameLabel]
	for _, ref := range sc.OwnerReferences {
		if ref.Kind == "Cluster" && ref.APIVersion == clusterv1.GroupVersion.String() {
			name, owned = ref.Name, true
			break
		}
	}
	if cl, err = gate.Cluster(ctx, r.Client, sc.Namespace, name); cl == nil || err != nil {
		return nil, false, err
	}
	return cl, owned, nil
}

func (r *Reconciler) reconcileNormal(ctx context.Context, sc *infrav1.SimCluster, cluster *clusterv1.Cluster) (ctrl.Result, error) {
	regions, err := r.Cloud.DescribeRegions(ctx)
	if err != nil {
		setReady(sc, metav1.ConditionFalse, infrav1.CloudErrorReason, "describing regions: "+err.Error())
		return ctrl.Result{RequeueAfter: CloudRetry}, nil
	}
	var zones []string
	found := false
	for _, rg := range regions {
		if rg.Name == sc.Spec.Region {
			zones, found = rg.Zones, true
		}
	}
	if !found {
		setReady(sc, metav1.ConditionFalse, infrav1.InvalidConfigurationReason,
			fmt.Sprintf("spec.region: the simulated cloud has no region %q", sc.Spec.Region))
		return ctrl.Result{}, nil
	}
	resp, err := r.Cloud.CreateNetwork(ctx, api.CreateNetworkRequest{
		ClientToken: string(sc.UID), Region: sc.Spec.Region,
		Tags: map[string]string{TagSimClusterUID: string(sc.UID), TagCluster: sc.Namespace + "/" + cluster.Name},
	})
	switch {
	case err != nil && cloudclient.IsInvalid(err):
		setReady(sc, metav1.ConditionFalse, infrav1.InvalidConfigurationReason, "creating the network: "+err.Error())
		return ctrl.Result{}, nil
	case err != nil:
		setReady(sc, metav1.ConditionFalse, infrav1.CloudErrorReason, "creating the network: "+err.Error())
		events.Eventf(r.Recorder, sc, corev1.EventTypeWarning, infrav1.CloudErrorReason, "Creating the network: %v", err)
		return ctrl.Result{RequeueAfter: CloudRetry}, nil
	}
	if resp.Created {
		events.Eventf(r.Recorder, sc, corev1.EventTypeNormal, "NetworkCreated", "Created network %s in %s", resp.Network.NetworkID, sc.Spec.Region)
	}
	sc.Status.NetworkID = resp.Network.NetworkID
	sort.Strings(zones)
	fds := make([]clusterv1.FailureDomain, 0, len(zones))
	for _, z := range zones {
		fds = append(fds, clusterv1.FailureDomain{Name: z, ControlPlane: ptr.To(true)})
	}
	sc.Status.FailureDomains = fds
	sc.Status.Initialization.Provisioned = ptr.To(true)
	setReady(sc, metav1.ConditionTrue, NetworkReadyReason, "network "+resp.Network.NetworkID+" exists")
	return ctrl.Result{RequeueAfter: requeue.After(r.Resync, DefaultResync)}, nil
}

// reconcileDelete deletes the network; the cloud refuses while instances still use it, so
// the SimCluster waits for its machines to go first.
func (r *Reconciler) reconcileDelete(ctx context.Context, sc *infrav1.SimCluster) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(sc, infrav1.SimClusterFinalizer) {
		return ctrl.Result{}, nil
	}
	ids := []string{}
	if sc.Status.NetworkID != "" {
		ids = append(ids, sc.Status.NetworkID)
	} else {
		// The network may have been created by a pass that crashed before recording it.
		nets, err := r.Cloud.DescribeNetworks(ctx, api.DescribeNetworksRequest{Tags: map[string]string{TagSimClusterUID: string(sc.UID)}})
		if err != nil {
			setReady(sc, metav1.ConditionFalse, infrav1.CloudErrorReason, "looking up the network: "+err.Error())
			return ctrl.Result{RequeueAfter: CloudRetry}, nil
		}
		for _, n := range nets {
			ids = append(ids, n.NetworkID)
		}
	}
	for _, id := range ids {
		err := r.Cloud.DeleteNetwork(ctx, id)
		switch {
		case err == nil, cloudclient.IsNotFound(err):
		case cloudclient.IsConflict(err):
			setReady(sc, metav1.ConditionFalse, DeletingNetworkReason, fmt.Sprintf("network %s is still in use: %v", id, err))
			return ctrl.Result{RequeueAfter: DependentWait}, nil
		default:
			setReady(sc, metav1.ConditionFalse, infrav1.CloudErrorReason, fmt.Sprintf("deleting network %s: %v", id, err))
			return ctrl.Result{RequeueAfter: CloudRetry}, nil
		}
		events.Eventf(r.Recorder, sc, corev1.EventTypeNormal, "NetworkDeleted", "Deleted network %s", id)
	}
	controllerutil.RemoveFinalizer(sc, infrav1.SimClusterFinalizer)
	return ctrl.Result{}, nil
}

func setReady(sc *infrav1.SimCluster, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&sc.Status.Conditions, metav1.Condition{Type: infrav1.ReadyCondition, Status: s, Reason: reason,
		Message: msg, ObservedGeneration: sc.Generation})
}
