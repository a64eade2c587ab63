package machine

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/remote"
	"github.com/machina-dev/machina/internal/patch"
)

// Node annotations the controller maintains.
const (
	// LabelsFromMachineAnnotation lists (comma-separated) the Node labels the Machine
	// manages, so a label dropped from the Machine is removed from the Node and labels set
	// by others are left alone.
	LabelsFromMachineAnnotation = "cluster.x-k8s.io/labels-from-machine"
	// ClusterNameAnnotation, ClusterNamespaceAnnotation and MachineAnnotation name the
	// Node's Machine.
	ClusterNameAnnotation      = "cluster.x-k8s.io/cluster-name"
	ClusterNamespaceAnnotation = "cluster.x-k8s.io/cluster-namespace"
	MachineAnnotation          = "cluster.x-k8s.io/machine"
)

// ManagedNodeLabel reports whether a Machine label is propagated to its Node:
// node-role.kubernetes.io/*, and labels in (subdomains of) node-restriction.kubernetes.io
// and node.cluster.x-k8s.io.
func ManagedNodeLabel(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	if prefix == clusterv1.NodeRoleLabelPrefix {
		return true
	}
	for _, d := range []string{clusterv1.NodeRestrictionLabelDomain, clusterv1.ManagedNodeLabelDomain} {
		if prefix == d || strings.HasSuffix(prefix, "."+d) {
			return true
		}
	}
	return false
}

// reconcileNode finds the Machine's Node by providerID in the workload cluster, records it
// in status.nodeRef and keeps its managed labels and taints in sync.
func (r *Reconciler) reconcileNode(ctx context.Context, m *clusterv1.Machine, cluster *clusterv1.Cluster) (ctrl.Result, error) {
	if m.Spec.ProviderID == "" {
		setNodeConditions(m, metav1.ConditionUnknown, clusterv1.MachineNodeDoesNotExistReason, "waiting for the infrastructure to report spec.providerID")
		return ctrl.Result{}, nil
	}
	wc, err := r.Remote.Client(ctx, m.Namespace, cluster.Name)
	if err != nil {
		setNodeConditions(m, metav1.ConditionUnknown, clusterv1.MachineNodeConnectionDownReason, err.Error())
		return ctrl.Result{RequeueAfter: WaitRequeue}, nil
	}
	nodes, err := r.Remote.Nodes(ctx, m.Namespace, cluster.Name)
	if err != nil {
		nodes = nil // fall back to listing through the direct client
	}
	node, err := findNode(ctx, wc, nodes, m)
	if err != nil {
		setNodeConditions(m, metav1.ConditionUnknown, clusterv1.MachineNodeInspectionFailedReason, err.Error())
		return ctrl.Result{RequeueAfter: WaitRequeue}, nil
	}
	if node == nil {
		if m.Status.NodeRef.IsDefined() {
			setNodeConditions(m, metav1.ConditionFalse, clusterv1.MachineNodeDeletedReason,
				fmt.Sprintf("Node %s has been deleted", m.Status.NodeRef.Name))
			return ctrl.Result{RequeueAfter: WaitRequeue}, nil
		}
		setNodeConditions(m, metav1.ConditionUnknown, clusterv1.MachineNodeDoesNotExistReason,
			"waiting for a Node with spec.providerID "+m.Spec.ProviderID)
		return ctrl.Result{RequeueAfter: WaitRequeue}, nil
	}
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: node.Name}
	info := node.Status.NodeInfo
	m.Status.NodeInfo = &info
	err = syncNode(ctx, wc, m, cluster, node)
	nodeHealth(m, node)
	if apierrors.IsConflict(err) {
		// The Node changed since it was read: try again soon, on fresh data.
		return ctrl.Result{RequeueAfter: patch.ConflictRetry}, nil
	}
	return ctrl.Result{}, err
}

// findNode returns the Machine's Node: the one named by nodeRef when it still has the
// Machine's providerID, else the one whose spec.providerID matches; nil when there is none.
// Both come from the Node cache when there is one (a read of the workload apiserver per pass
// of every linked Machine was 1.4 requests per Machine in capi-scale).
func findNode(ctx context.Context, wc client.Client, nodeCache client.Reader, m *clusterv1.Machine) (*corev1.Node, error) {
	if name := m.Status.NodeRef.Name; name != "" {
		var reader client.Reader = wc
		if nodeCache != nil {
			reader = nodeCache
		}
		var n corev1.Node
		err := reader.Get(ctx, client.ObjectKey{Name: name}, &n)
		if err == nil && n.Spec.ProviderID == m.Spec.ProviderID {
			return &n, nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	var nodes corev1.NodeList
	if nodeCache != nil {
		if err := nodeCache.List(ctx, &nodes, client.MatchingFields{remote.ProviderIDIndex: m.Spec.ProviderID}); err != nil {
			return nil, fmt.Errorf("listing Nodes: %w", err)
		}
	} else if err := wc.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("listing Nodes: %w", err)
	}
	for i := range nodes.Items {
		if nodes.Items[i].Spec.ProviderID == m.Spec.ProviderID {
			return &nodes.Items[i], nil
		}
	}
	return nil, nil
}

// syncNode applies the Machine's managed labels, the Machine annotations and the Machine's
// taints (syncTaints) to the Node, removing managed labels and taints the Machine no longer
// has.
func syncNode(ctx context.Context, wc client.Client, m *clusterv1.Machine, cluster *clusterv1.Cluster, node *corev1.Node) error {
	want := map[string]string{}
	for k, v := range m.Labels {
		if ManagedNodeLabel(k) {
			want[k] = v
		}
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)

	base := node.DeepCopy()
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	for _, k := range strings.Split(node.Annotations[LabelsFromMachineAnnotation], ",") {
		if _, keep := want[k]; k != "" && !keep {
			delete(node.Labels, k)
		}
	}
	for k, v := range want {
		node.Labels[k] = v
	}
	if len(keys) == 0 {
		delete(node.Annotations, LabelsFromMachineAnnotation)
	} else {
		node.Annotations[LabelsFromMachineAnnotation] = strings.Join(keys, ",")
	}
	node.Annotations[ClusterNameAnnotation] = cluster.Name
	node.Annotations[ClusterNamespaceAnnotation] = cluster.Namespace
	node.Annotations[MachineAnnotation] = m.Name
	tainted := syncTaints(node, m.Spec.Taints)
	if !tainted && equalMaps(base.Labels, node.Labels) && equalMaps(base.Annotations, node.Annotations) {
		return nil
	}
	// A merge patch sets and removes single keys, so labels others set meanwhile survive.
	// It replaces spec.taints whole, though: a patch that changes them carries the Node's
	// resourceVersion, so a taint somebody else changed meanwhile fails it (a conflict, the
	// caller looks again soon) instead of being overwritten.
	opts := []client.MergeFromOption{}
	if tainted {
		opts = append(opts, client.MergeFromWithOptimisticLock{})
	}
	if err := wc.Patch(ctx, node, client.MergeFromWithOptions(base, opts...)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("syncing labels and taints of Node %s: %w", node.Name, err)
	}
	return nil
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func setNodeConditions(m *clusterv1.Machine, s metav1.ConditionStatus, reason, msg string) {
	setCondition(m, clusterv1.MachineNodeReadyCondition, s, reason, msg)
	setCondition(m, clusterv1.MachineNodeHealthyCondition, s, reason, msg)
}

// nodeHealth sets NodeReady from the Node's Ready condition and NodeHealthy from Ready and
// the pressure conditions.
func nodeHealth(m *clusterv1.Machine, node *corev1.Node) {
	ready := corev1.ConditionUnknown
	readyMsg := "the Node reports no Ready condition"
	var pressure []string
	for _, c := range node.Status.Conditions {
		switch c.Type {
		case corev1.NodeReady:
			ready, readyMsg = c.Status, c.Message
		case corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure:
			if c.Status == corev1.ConditionTrue {
				pressure = append(pressure, string(c.Type))
			}
		}
	}
	switch ready {
	case corev1.ConditionTrue:
		setCondition(m, clusterv1.MachineNodeReadyCondition, metav1.ConditionTrue, clusterv1.MachineNodeReadyReason, "")
	case corev1.ConditionFalse:
		setCondition(m, clusterv1.MachineNodeReadyCondition, metav1.ConditionFalse, clusterv1.MachineNodeNotReadyReason, readyMsg)
	default:
		setCondition(m, clusterv1.MachineNodeReadyCondition, metav1.ConditionUnknown, clusterv1.MachineNodeReadyUnknownReason, readyMsg)
	}
	switch {
	case ready == corev1.ConditionTrue && len(pressure) == 0:
		setCondition(m, clusterv1.MachineNodeHealthyCondition, metav1.ConditionTrue, clusterv1.MachineNodeHealthyReason, "")
	case ready == corev1.ConditionTrue || ready == corev1.ConditionFalse:
		msg := "Node " + node.Name + ": "
		if ready != corev1.ConditionTrue {
			msg += "not Ready"
		}
		if len(pressure) > 0 {
			if ready != corev1.ConditionTrue {
				msg += ", "
			}
			msg += strings.Join(pressure, ", ")
		}
		setCondition(m, clusterv1.MachineNodeHealthyCondition, metav1.ConditionFalse, clusterv1.MachineNodeNotHealthyReason, msg)
	default:
		setCondition(m, clusterv1.MachineNodeHealthyCondition, metav1.ConditionUnknown, clusterv1.MachineNodeHealthUnknownReason,
			"Node "+node.Name+": Ready is Unknown")
	}
}
