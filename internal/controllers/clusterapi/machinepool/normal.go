package machinepool

import (
	"context"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/labels/format"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/external"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/versions"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/requeue"
)

// reconcileNormal runs the steps of a pool that is not being deleted: bootstrap data, the
// InfraMachinePool, MachinePool Machines, then Nodes and replica counts.
func (r *Reconciler) reconcileNormal(ctx context.Context, mp *clusterv1.MachinePool, cluster *clusterv1.Cluster) (ctrl.Result, error) {
	if err := r.reconcileBootstrap(ctx, mp); err != nil {
		return ctrl.Result{}, err
	}
	infra, err := r.reconcileInfrastructure(ctx, mp)
	if err != nil || infra == nil {
		r.updatePhase(mp)
		return ctrl.Result{RequeueAfter: WaitRequeue}, err
	}
	var machines []*clusterv1.Machine
	kind := infra.String("status", "infrastructureMachineKind")
	if kind != "" {
		if machines, err = r.reconcileMachines(ctx, mp, infra, kind); err != nil {
			return ctrl.Result{}, err
		}
	}
	nodes, nodesRead := r.reconcileNodes(ctx, mp, cluster)
	setVersions(mp, kind != "", machines, nodes, nodesRead)
	r.updatePhase(mp)
	if ptr.Deref(mp.Status.ReadyReplicas, 0) != ptr.Deref(mp.Spec.Replicas, 1) ||
		ptr.Deref(mp.Status.Replicas, 0) != ptr.Deref(mp.Spec.Replicas, 1) {
		return ctrl.Result{RequeueAfter: WaitRequeue}, nil
	}
	return ctrl.Result{RequeueAfter: requeue.Jittered(r.Resync, DefaultResync)}, nil
}

// reconcileBootstrap records whether the pool's shared bootstrap data exists. A bootstrap
// config is owned and its data secret name copied into the template once it is ready.
func (r *Reconciler) reconcileBootstrap(ctx context.Context, mp *clusterv1.MachinePool) error {
	b := &mp.Spec.Template.Spec.Bootstrap
	if b.ConfigRef.IsDefined() {
		cfg, err := r.Resolver.Get(ctx, r.Client, b.ConfigRef, mp.Namespace)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return err
		default:
			if err := r.poolWatcher.Watch(cfg.GroupVersionKind()); err != nil {
				return err
			}
			if err := external.EnsureOwned(ctx, r.Client, cfg, mp, true, mp.Spec.ClusterName); err != nil {
				return err
			}
			if name := cfg.String("status", "dataSecretName"); name != "" && cfg.Provisioned("dataSecretCreated") &&
				ptr.Deref(b.DataSecretName, "") != name {
				b.DataSecretName = ptr.To(name)
			}
		}
	}
	if ptr.Deref(b.DataSecretName, "") == "" {
		setCondition(mp, BootstrapConfigReadyCondition, metav1.ConditionFalse, "WaitingForBootstrapData",
			"waiting for spec.template.spec.bootstrap.dataSecretName")
		return nil
	}
	mp.Status.Initialization.BootstrapDataSecretCreated = ptr.To(true)
	setCondition(mp, BootstrapConfigReadyCondition, metav1.ConditionTrue, "DataSecretProvided", "")
	return nil
}

// reconcileInfrastructure owns the InfraMachinePool and copies what it reports; nil when it
// does not exist (yet).
func (r *Reconciler) reconcileInfrastructure(ctx context.Context, mp *clusterv1.MachinePool) (*external.Object, error) {
	ref := mp.Spec.Template.Spec.InfrastructureRef
	infra, err := r.Resolver.Get(ctx, r.Client, ref, mp.Namespace)
	if apierrors.IsNotFound(err) {
		setCondition(mp, InfrastructureReadyCondition, metav1.ConditionFalse, "InfrastructureDoesNotExist",
			fmt.Sprintf("%s %s does not exist", ref.Kind, ref.Name))
		return nil, nil
	}
	if err != nil {
		setCondition(mp, InfrastructureReadyCondition, metav1.ConditionUnknown, "InternalError", err.Error())
		return nil, err
	}
	if err := r.poolWatcher.Watch(infra.GroupVersionKind()); err != nil {
		return nil, err
	}
	if err := external.EnsureOwned(ctx, r.Client, infra, mp, true, mp.Spec.ClusterName); err != nil {
		return nil, err
	}
	if !infra.Provisioned("provisioned") {
		msg := fmt.Sprintf("%s %s is not provisioned yet", ref.Kind, ref.Name)
		if c := infra.Condition(clusterv1.ReadyCondition); c != nil && c.Message != "" {
			msg += ": " + c.Message
		}
		setCondition(mp, InfrastructureReadyCondition, metav1.ConditionFalse, "InfrastructureNotReady", msg)
		return nil, nil
	}
	if !ptr.Deref(mp.Status.Initialization.InfrastructureProvisioned, false) {
		mp.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
		events.Eventf(r.Recorder, mp, corev1.EventTypeNormal, "InfrastructureProvisioned", "%s %s is provisioned", ref.Kind, ref.Name)
	}
	setCondition(mp, InfrastructureReadyCondition, metav1.ConditionTrue, "InfrastructureReady", "")
	ids, _, _ := unstructured.NestedStringSlice(infra.Object, "spec", "providerIDList")
	sort.Strings(ids)
	if !slices.Equal(ids, mp.Spec.ProviderIDList) {
		mp.Spec.ProviderIDList = ids
	}
	if n, found, _ := unstructured.NestedInt64(infra.Object, "status", "replicas"); found {
		mp.Status.Replicas = ptr.To(int32(n))
	} else {
		mp.Status.Replicas = ptr.To(int32(len(ids)))
	}
	return infra, nil
}

// reconcileNodes finds the pool's Nodes in the workload cluster by provider ID and counts the
// ready ones. It returns the Nodes found, and false when the workload cluster could not be
// read (the status then keeps what it last saw).
func (r *Reconciler) reconcileNodes(ctx context.Context, mp *clusterv1.MachinePool, cluster *clusterv1.Cluster) ([]*corev1.Node, bool) {
	if len(mp.Spec.ProviderIDList) == 0 {
		mp.Status.NodeRefs = nil
		mp.Status.ReadyReplicas, mp.Status.AvailableReplicas = ptr.To(int32(0)), ptr.To(int32(0))
		r.setAvailable(mp)
		return nil, true
	}
	wc, err := r.Remote.Client(ctx, mp.Namespace, cluster.Name)
	if err != nil {
		setCondition(mp, AvailableCondition, metav1.ConditionUnknown, "WorkloadClusterUnreachable", err.Error())
		return nil, false
	}
	var nodes corev1.NodeList
	if err := wc.List(ctx, &nodes); err != nil {
		setCondition(mp, AvailableCondition, metav1.ConditionUnknown, "WorkloadClusterUnreachable", err.Error())
		return nil, false
	}
	byID := map[string]*corev1.Node{}
	for i := range nodes.Items {
		if id := nodes.Items[i].Spec.ProviderID; id != "" {
			byID[id] = &nodes.Items[i]
		}
	}
	var refs []corev1.ObjectReference
	var found []*corev1.Node
	var ready int32
	for _, id := range mp.Spec.ProviderIDList {
		n, ok := byID[id]
		if !ok {
			continue
		}
		refs = append(refs, corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID})
		found = append(found, n)
		if util.IsNodeReady(n) {
			ready++
		}
	}
	mp.Status.NodeRefs = refs
	mp.Status.ReadyReplicas, mp.Status.AvailableReplicas = ptr.To(ready), ptr.To(ready)
	r.setAvailable(mp)
	return found, true
}

// setVersions fills status.versions as Cluster API does: from the pool's Machines when its
// InfraMachinePool has them (hasMachines), else from the kubelet versions of its Nodes. While
// the Nodes could not be read (nodesRead false) a pool without Machines keeps what it had.
func setVersions(mp *clusterv1.MachinePool, hasMachines bool, machines []*clusterv1.Machine, nodes []*corev1.Node, nodesRead bool) {
	switch {
	case hasMachines:
		mp.Status.Versions = versions.FromMachines(machines)
	case nodesRead:
		mp.Status.Versions = versions.FromNodes(nodes)
	}
}

func (r *Reconciler) setAvailable(mp *clusterv1.MachinePool) {
	want := ptr.Deref(mp.Spec.Replicas, 1)
	if got := ptr.Deref(mp.Status.AvailableReplicas, 0); got >= want {
		setCondition(mp, AvailableCondition, metav1.ConditionTrue, "Available", "")
	} else {
		setCondition(mp, AvailableCondition, metav1.ConditionFalse, "NotAvailable",
			fmt.Sprintf("%d of %d replicas are available", got, want))
	}
}

// updatePhase derives the pool's phase from its status.
func (r *Reconciler) updatePhase(mp *clusterv1.MachinePool) {
	want := ptr.Deref(mp.Spec.Replicas, 1)
	replicas, ready := ptr.Deref(mp.Status.Replicas, 0), ptr.Deref(mp.Status.ReadyReplicas, 0)
	var p clusterv1.MachinePoolPhase
	switch {
	case !ptr.Deref(mp.Status.Initialization.BootstrapDataSecretCreated, false):
		p = clusterv1.MachinePoolPhasePending
	case !ptr.Deref(mp.Status.Initialization.InfrastructureProvisioned, false):
		p = clusterv1.MachinePoolPhaseProvisioning
	case replicas < want || ready < want && replicas == want:
		p = clusterv1.MachinePoolPhaseScalingUp
	case replicas > want:
		p = clusterv1.MachinePoolPhaseScalingDown
	case ready == want:
		p = clusterv1.MachinePoolPhaseRunning
	default:
		p = clusterv1.MachinePoolPhaseProvisioned
	}
	if mp.Status.Phase != string(p) {
		mp.Status.Phase = string(p)
	}
}

// listInfraMachines lists the InfraMachines of kind (in the InfraMachinePool's group) that
// carry the pool's labels.
func (r *Reconciler) listInfraMachines(ctx context.Context, mp *clusterv1.MachinePool, group, kind string) ([]unstructured.Unstructured, error) {
	res, err := r.Resolver.Resolve(ctx, clusterv1.ContractVersionedObjectReference{APIGroup: group, Kind: kind, Name: "x"})
	if err != nil {
		return nil, err
	}
	if err := r.machineWatcher.Watch(res.GVK); err != nil {
		return nil, err
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(res.GVK.GroupVersion().WithKind(kind + "List"))
	if err := r.Client.List(ctx, list, client.InNamespace(mp.Namespace), poolLabels(mp)); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// poolLabels selects the objects of the pool.
func poolLabels(mp *clusterv1.MachinePool) client.MatchingLabels {
	return client.MatchingLabels{clusterv1.ClusterNameLabel: mp.Spec.ClusterName, clusterv1.MachinePoolNameLabel: format.MustFormatValue(mp.Name)}
}
