package gate

import (
	"maps"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// ClusterChanged passes the Cluster events a controller of the Cluster's members (Machines,
// MachineSets, InfraMachines, ...) can act on: creation, deletion, and updates to what those
// controllers read of a Cluster — its spec (spec.paused among it), labels, annotations,
// deletion, status.initialization, and the InfrastructureReady and ControlPlaneInitialized
// conditions. Other status updates (replica counts, aggregated conditions) pass nothing:
// mapped to every member, each of them would cost a pass per member, and the Cluster's
// status changes with every member, which made a fleet's passes grow with the square of
// its size.
var ClusterChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*clusterv1.Cluster)
		n, ok2 := e.ObjectNew.(*clusterv1.Cluster)
		if !ok1 || !ok2 {
			return true
		}
		return clusterChanged(o, n)
	},
}

func clusterChanged(o, n *clusterv1.Cluster) bool {
	if o.Generation != n.Generation || !o.DeletionTimestamp.Equal(n.DeletionTimestamp) ||
		!maps.Equal(o.Labels, n.Labels) || !maps.Equal(o.Annotations, n.Annotations) ||
		!equality.Semantic.DeepEqual(o.Status.Initialization, n.Status.Initialization) {
		return true
	}
	for _, t := range []string{clusterv1.ClusterInfrastructureReadyCondition, clusterv1.ClusterControlPlaneInitializedCondition} {
		oc, nc := meta.FindStatusCondition(o.Status.Conditions, t), meta.FindStatusCondition(n.Status.Conditions, t)
		if (oc == nil) != (nc == nil) || (oc != nil && (oc.Status != nc.Status || !oc.LastTransitionTime.Equal(&nc.LastTransitionTime))) {
			return true
		}
	}
	return false
}
