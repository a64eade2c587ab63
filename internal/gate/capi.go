package gate

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
)

// Cluster reads the Cluster API Cluster name in namespace, whose spec.paused ClusterAPI
// gates on. It returns nil without an error when name is empty or no such Cluster exists:
// an object whose Cluster is missing is still gated by its own paused annotation, and each
// controller decides what a missing Cluster means for it.
func Cluster(ctx context.Context, c client.Client, namespace, name string) (*clusterv1.Cluster, error) {
	if name == "" {
		return nil, nil
	}
	cl, err := util.GetClusterByName(ctx, c, namespace, name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return cl, err
}

// ClusterAPI applies the paused gate of the Cluster API contract to obj: it is paused when it
// carries the cluster.x-k8s.io/paused annotation or when its Cluster (nil if unknown) has
// spec.paused set. conds is the object's status.conditions, where the Paused condition is
// set with the object's generation; the returned bool says whether it changed.
func ClusterAPI(obj client.Object, cluster *clusterv1.Cluster, conds *[]metav1.Condition) (Decision, bool) {
	d := Decision{}
	switch {
	case cluster != nil && cluster.Spec.Paused != nil && *cluster.Spec.Paused:
		d.Paused, d.Message = true, "Cluster "+cluster.Name+" has spec.paused set"
	case HasPausedAnnotation(obj):
		d.Paused, d.Message = true, "the object has the "+clusterv1.PausedAnnotation+" annotation"
	}
	cond := metav1.Condition{Type: clusterv1.PausedCondition, ObservedGeneration: obj.GetGeneration(),
		Status: metav1.ConditionFalse, Reason: clusterv1.NotPausedReason}
	if d.Paused {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, clusterv1.PausedReason, d.Message
	}
	if conds == nil {
		return d, false
	}
	d.Resumed = !d.Paused && meta.IsStatusConditionTrue(*conds, clusterv1.PausedCondition)
	return d, meta.SetStatusCondition(conds, cond)
}

// HasPausedAnnotation reports whether obj carries cluster.x-k8s.io/paused (any value).
func HasPausedAnnotation(obj client.Object) bool {
	_, ok := obj.GetAnnotations()[clusterv1.PausedAnnotation]
	return ok
}

// PausedAsMirror reports whether obj is paused only because it is the Cluster API mirror of
// a resource the Machine API owns: the paused annotation together with the sync finalizer.
// Such a pause means "the other API reconciles this", not "leave it alone", which matters to
// a Cluster API MachineHealthCheck that does own the check (see the sync's remediation
// hand-over in internal/controllers/sync/machinesync).
func PausedAsMirror(obj client.Object) bool {
	if !HasPausedAnnotation(obj) {
		return false
	}
	for _, f := range obj.GetFinalizers() {
		if f == authority.SyncFinalizer {
			return true
		}
	}
	return false
}
