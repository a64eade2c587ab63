package gate

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// NodeChanged passes every Node event except the updates that only renew a heartbeat: a
// kubelet re-posts its unchanged status every minute (every 10 s in a kubelet without
// Leases), moving nothing but the conditions' lastHeartbeatTime. No controller of machina
// reads heartbeat times — a kubelet that stops posting shows up as the node lifecycle
// controller turning Ready Unknown, which passes — while each heartbeat mapped to a Machine,
// a MachineSet and a health check cost a pass of each (and the Machine API Machine's an
// instance lookup in the cloud): at a thousand Nodes, most of a quiet fleet's passes.
var NodeChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Node)
		n, ok2 := e.ObjectNew.(*corev1.Node)
		if !ok1 || !ok2 {
			return true
		}
		return nodeChanged(o, n)
	},
}

func nodeChanged(o, n *corev1.Node) bool {
	if !maps.Equal(o.Labels, n.Labels) || !maps.Equal(o.Annotations, n.Annotations) ||
		!o.DeletionTimestamp.Equal(n.DeletionTimestamp) || !slices.Equal(o.Finalizers, n.Finalizers) ||
		!equality.Semantic.DeepEqual(o.Spec, n.Spec) {
		return true
	}
	oldStatus, newStatus := o.Status, n.Status // shallow copies: nothing below writes through them
	oldStatus.Conditions, newStatus.Conditions = nil, nil
	if !equality.Semantic.DeepEqual(oldStatus, newStatus) {
		return true
	}
	return !slices.EqualFunc(o.Status.Conditions, n.Status.Conditions, func(a, b corev1.NodeCondition) bool {
		return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message &&
			a.LastTransitionTime.Equal(&b.LastTransitionTime)
	})
}
