package machine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mapimachine "github.com/machina-dev/machina/internal/controllers/machineapi/machine"
	"github.com/machina-dev/machina/internal/events"
)

// Delete protection for the Machine whose Node runs the manager itself, as the Machine API
// Machine controller has it: draining that Node would evict the manager in the middle of the
// deletion, deleting the InfraMachine would take its host away, and deleting the Node would
// remove the Node it runs on. The deletion waits before its first step.
const (
	// NodeNameEnv names the environment variable that tells the manager which Node it runs
	// on (the Deployment sets it from the downward API); the same as the Machine API's.
	NodeNameEnv = mapimachine.NodeNameEnv
	// AllowManagerNodeDeletionAnnotation on a Machine lets its deletion go on although its
	// Node runs the manager (any value); the same annotation as on a Machine API Machine.
	AllowManagerNodeDeletionAnnotation = mapimachine.AllowManagerNodeDeletionAnnotation
	// ManagerNodeProtectedReason: the Deleting condition's reason while the protection holds
	// the deletion.
	ManagerNodeProtectedReason = mapimachine.ManagerNodeProtectedReason
)

// protectsManager reports whether the deletion of m must wait because its Node is the one
// this manager runs on: the management cluster's Node r.NodeName exists, is not being
// deleted, and is the Machine's Node (the workload cluster's Node of that name has its UID:
// a workload cluster that is not the management cluster may have a Node of the same name),
// and m lacks the override annotation. When the workload cluster cannot be read, the
// deletion waits.
func (r *Reconciler) protectsManager(ctx context.Context, m *clusterv1.Machine, cluster *clusterv1.Cluster) (bool, error) {
	name := m.Status.NodeRef.Name
	if _, allowed := m.Annotations[AllowManagerNodeDeletionAnnotation]; r.NodeName == "" || name != r.NodeName || allowed {
		return false, nil
	}
	var own corev1.Node
	switch err := r.Client.Get(ctx, client.ObjectKey{Name: name}, &own); {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	if !own.DeletionTimestamp.IsZero() {
		return false, nil
	}
	if cluster == nil {
		return true, nil
	}
	wc, err := r.Remote.Client(ctx, m.Namespace, cluster.Name)
	if err != nil {
		return true, nil
	}
	var theirs corev1.Node
	switch err := wc.Get(ctx, client.ObjectKey{Name: name}, &theirs); {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return true, nil
	}
	return theirs.UID == own.UID, nil
}

// holdForManager reports the protection in the Deleting condition and, when that is news,
// in a Warning event.
func (r *Reconciler) holdForManager(m *clusterv1.Machine) {
	msg := fmt.Sprintf("Node %s runs the machina manager: the Machine is not drained or deleted under it and the Node is not deleted; "+
		"move the manager elsewhere, or add the annotation %s to delete it anyway", r.NodeName, AllowManagerNodeDeletionAnnotation)
	if c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineDeletingCondition); c != nil && c.Reason == ManagerNodeProtectedReason {
		return
	}
	deleting(m, ManagerNodeProtectedReason, msg)
	events.Eventf(r.Recorder, m, corev1.EventTypeWarning, ManagerNodeProtectedReason, "%s", msg)
}
