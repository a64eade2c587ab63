package cluster

import (
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// StatusInterval is the least time between two status writes of a Cluster that only change
// counts or condition messages (while its Machines come up, every Machine would otherwise
// cost the Cluster a write). A condition's status or reason, the phase or the observed
// generation changing goes out at once.
const StatusInterval = 2 * time.Second

// holdStatus says how long to hold back the status change from before to after (0: write
// now).
func (r *Reconciler) holdStatus(key types.NamespacedName, before, after *clusterv1.Cluster) time.Duration {
	return r.writes.Hold(key, !equality.Semantic.DeepEqual(before.Status, after.Status), minorChange(before, after))
}

// minorChange: only counters and condition messages differ.
func minorChange(before, after *clusterv1.Cluster) bool {
	if !after.DeletionTimestamp.IsZero() {
		return false
	}
	strip := func(cl *clusterv1.Cluster) *clusterv1.ClusterStatus {
		s := cl.Status.DeepCopy()
		s.Workers, s.ControlPlane = nil, nil
		for i := range s.Conditions {
			s.Conditions[i].Message = ""
		}
		return s
	}
	return equality.Semantic.DeepEqual(strip(before), strip(after))
}
