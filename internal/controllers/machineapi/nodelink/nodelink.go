// Package nodelink links Nodes to Machine API Machines: it finds a Node's Machine by provider
// ID (falling back to an internal IP), records the Node in the Machine's status.nodeRef,
// annotates the Node with its Machine, and applies the Machine's spec.metadata.labels,
// spec.metadata.annotations and spec.taints to the Node (a taint whose key and effect the
// Node already has is left as the Node has it).
package nodelink

import (
	"context"
	"fmt"
	"maps"
	"slices"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/machina-dev/machina/internal/controllers/machineapi/machine"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/patch"
)

// Cache index names.
const (
	nodeProviderIDIndex    = "nodelink.node.providerID"
	nodeInternalIPIndex    = "nodelink.node.internalIP"
	machineProviderIDIndex = "nodelink.machine.providerID"
	machineInternalIPIndex = "nodelink.machine.internalIP"
)

// Reconciler links one Node at a time.
type Reconciler struct {
	Client client.Client
	// APIReader reads a Machine fresh before its status is written: the Machine controller
	// writes the same Machine moments earlier, and a write from a stale copy would only
	// bounce off the optimistic lock.
	APIReader client.Reader
}

// +kubebuilder:rbac:groups=machine.openshift.io,resources=machines;machines/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;update;patch

// SetupWithManager registers the indexes and the controller.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	idx := mgr.GetFieldIndexer()
	for _, i := range []struct {
		obj   client.Object
		name  string
		value func(client.Object) []string
	}{
		{&corev1.Node{}, nodeProviderIDIndex, func(o client.Object) []string { return nonEmpty(o.(*corev1.Node).Spec.ProviderID) }},
		{&corev1.Node{}, nodeInternalIPIndex, func(o client.Object) []string { return nodeIPs(o.(*corev1.Node)) }},
		{&machinev1beta1.Machine{}, machineProviderIDIndex, func(o client.Object) []string {
			m := o.(*machinev1beta1.Machine)
			if m.Spec.ProviderID == nil {
				return nil
			}
			return nonEmpty(*m.Spec.ProviderID)
		}},
		{&machinev1beta1.Machine{}, machineInternalIPIndex, func(o client.Object) []string {
			return machineIPs(o.(*machinev1beta1.Machine))
		}},
	} {
		if err := idx.IndexField(ctx, i.obj, i.name, i.value); err != nil {
			return err
		}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("machineapi-nodelink").
		For(&corev1.Node{}, builder.WithPredicates(gate.NodeChanged)).
		Watches(&machinev1beta1.Machine{}, handler.EnqueueRequestsFromMapFunc(r.machineToNodes)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 10}).
		Complete(r)
}

// machineToNodes maps a Machine to the Node it names and the Nodes of its provider ID; when
// no Node has its provider ID, a Machine not being deleted maps to the Nodes that share one
// of its internal IPs, so on a platform whose Nodes carry no provider ID a Machine whose
// address appears after its Node registered is linked then, not at the Node's next change.
// Each lookup is a cache index, not a list of every Node.
func (r *Reconciler) machineToNodes(ctx context.Context, o client.Object) []reconcile.Request {
	m := o.(*machinev1beta1.Machine)
	var reqs []reconcile.Request
	if m.Status.NodeRef != nil {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: m.Status.NodeRef.Name}})
	}
	byID := r.nodesBy(ctx, nodeProviderIDIndex, ptr.Deref(m.Spec.ProviderID, ""))
	reqs = append(reqs, byID...)
	if len(byID) > 0 || !m.DeletionTimestamp.IsZero() {
		return reqs
	}
	for _, ip := range machineIPs(m) {
		reqs = append(reqs, r.nodesBy(ctx, nodeInternalIPIndex, ip)...)
	}
	return reqs
}

// nodesBy lists the Nodes whose index field has the value (none for an empty one), as
// requests.
func (r *Reconciler) nodesBy(ctx context.Context, index, value string) []reconcile.Request {
	if value == "" {
		return nil
	}
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes, client.MatchingFields{index: value}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(nodes.Items))
	for _, n := range nodes.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: n.Name}})
	}
	return reqs
}

// Reconcile links a Node and its Machine.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	node := &corev1.Node{}
	if err := r.Client.Get(ctx, req.NamespacedName, node); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !node.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	m, err := r.machineFor(ctx, node)
	if err != nil || m == nil {
		return ctrl.Result{}, err
	}
	// The Machine's authority decides who links its Node: the Cluster API Machine
	// controller does when Cluster API owns it.
	if d, _, err := gate.MachineAPI(m.DeepCopy()); err != nil || d.Paused {
		return ctrl.Result{}, err
	}
	if err := r.updateNode(ctx, node, m); err != nil {
		return ctrl.Result{}, fmt.Errorf("updating Node %s: %w", node.Name, err)
	}
	if ref := m.Status.NodeRef; ref == nil || ref.Name != node.Name || ref.UID != node.UID {
		if r.APIReader != nil {
			if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
				return ctrl.Result{}, client.IgnoreNotFound(err)
			}
		}
		if _, err := patch.LockedStatus(ctx, r.Client, m, func() bool {
			m.Status.NodeRef = &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node.Name, UID: node.UID}
			// A provisioned Machine with a Node is Running by definition; saying so in the
			// same write spares the Machine controller a second one.
			if ptr.Deref(m.Status.Phase, "") == machinev1beta1.PhaseProvisioned {
				m.Status.Phase = ptr.To(machinev1beta1.PhaseRunning)
				now := metav1.Now()
				m.Status.LastUpdated = &now
			}
			return true
		}); err != nil {
			return ctrl.Result{}, fmt.Errorf("setting nodeRef of Machine %s/%s: %w", m.Namespace, m.Name, err)
		}
		log.FromContext(ctx).V(1).Info("linked", "machine", m.Namespace+"/"+m.Name)
	}
	return ctrl.Result{}, nil
}

// machineFor finds the Machine of a Node: by provider ID, else by a shared internal IP.
func (r *Reconciler) machineFor(ctx context.Context, node *corev1.Node) (*machinev1beta1.Machine, error) {
	var list machinev1beta1.MachineList
	if node.Spec.ProviderID != "" {
		if err := r.Client.List(ctx, &list, client.MatchingFields{machineProviderIDIndex: node.Spec.ProviderID}); err != nil {
			return nil, err
		}
		if len(list.Items) > 0 {
			return &list.Items[0], nil
		}
	}
	for _, ip := range nodeIPs(node) {
		if err := r.Client.List(ctx, &list, client.MatchingFields{machineInternalIPIndex: ip}); err != nil {
			return nil, err
		}
		if len(list.Items) == 1 {
			return &list.Items[0], nil
		}
	}
	return nil, nil
}

// updateNode annotates the Node with its Machine and applies the Machine's labels,
// annotations and taints. Those the Machine no longer lists are left alone: others may own
// them.
func (r *Reconciler) updateNode(ctx context.Context, node *corev1.Node, m *machinev1beta1.Machine) error {
	_, err := patch.Locked(ctx, r.Client, node, func() bool { return applyMachine(node, m) })
	return err
}

// applyMachine sets the Node's Machine annotation and adds the Machine's labels,
// annotations and taints to it, reporting whether anything changed.
func applyMachine(node *corev1.Node, m *machinev1beta1.Machine) bool {
	changed := copyInto(&node.Labels, m.Spec.ObjectMeta.Labels)
	// The Node's Machine annotation is NodeLink's own: the Machine cannot name another.
	annotations := maps.Clone(m.Spec.ObjectMeta.Annotations)
	delete(annotations, machine.NodeMachineAnnotation)
	if copyInto(&node.Annotations, annotations) {
		changed = true
	}
	if want := m.Namespace + "/" + m.Name; node.Annotations[machine.NodeMachineAnnotation] != want {
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		node.Annotations[machine.NodeMachineAnnotation] = want
		changed = true
	}
	for _, t := range m.Spec.Taints {
		// A Node has at most one taint per key and effect (the apiserver refuses a second):
		// one already there, whatever its value, is left as it is.
		if !slices.ContainsFunc(node.Spec.Taints, func(x corev1.Taint) bool { return x.Key == t.Key && x.Effect == t.Effect }) {
			node.Spec.Taints = append(node.Spec.Taints, t)
			changed = true
		}
	}
	return changed
}

// copyInto sets every key of from in *to, reporting whether that changed anything.
func copyInto(to *map[string]string, from map[string]string) bool {
	changed := false
	for k, v := range from {
		if *to == nil {
			*to = map[string]string{}
		}
		if old, ok := (*to)[k]; !ok || old != v {
			(*to)[k] = v
			changed = true
		}
	}
	return changed
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

func nodeIPs(n *corev1.Node) []string {
	var ips []string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && a.Address != "" {
			ips = append(ips, a.Address)
		}
	}
	return ips
}

func machineIPs(m *machinev1beta1.Machine) []string {
	var ips []string
	for _, a := range m.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && a.Address != "" {
			ips = append(ips, a.Address)
		}
	}
	return ips
}
