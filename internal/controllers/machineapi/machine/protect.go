package machine

import (
	"context"
	"fmt"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/mapicond"
)

// Delete protection for the Machine whose Node runs the manager itself: draining that Node
// would evict the manager in the middle of the deletion, and terminating it would take the
// manager's host away (seed 001: a Machine may not be deleted when its Node runs the Machine
// controller).
const (
	// NodeNameEnv names the environment variable that tells the manager which Node it runs
	// on; the Deployment sets it from the downward API (spec.nodeName).
	NodeNameEnv = "NODE_NAME"
	// AllowManagerNodeDeletionAnnotation on a Machine lets it be drained and deleted although
	// its Node runs the manager (any value).
	AllowManagerNodeDeletionAnnotation = "machina.dev/allow-manager-node-deletion"
	// ManagerNodeProtectedReason: Drainable=False while the protection holds the deletion.
	ManagerNodeProtectedReason = "ManagerNodeProtected"
)

// protectsManager reports whether the deletion of m must wait because its Node runs this
// manager: the Node exists and is not being deleted, and m lacks the override annotation.
func (r *Reconciler) protectsManager(ctx context.Context, m *machinev1beta1.Machine) (bool, error) {
	if r.NodeName == "" || m.Status.NodeRef == nil || m.Status.NodeRef.Name != r.NodeName ||
		hasAnnotation(m, AllowManagerNodeDeletionAnnotation) {
		return false, nil
	}
	var node corev1.Node
	err := r.Client.Get(ctx, client.ObjectKey{Name: r.NodeName}, &node)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return node.DeletionTimestamp.IsZero(), nil
}

// holdForManager reports the protection in Drainable and, when that is news, in an event.
func (r *Reconciler) holdForManager(m *machinev1beta1.Machine) {
	msg := fmt.Sprintf("Node %s runs the machina manager: the Machine is not drained or deleted under it; "+
		"move the manager elsewhere, or add the annotation %s to delete it anyway", r.NodeName, AllowManagerNodeDeletionAnnotation)
	if c := mapicond.Get(m.Status.Conditions, machinev1beta1.MachineDrainable); c != nil && c.Reason == ManagerNodeProtectedReason {
		return
	}
	setCondition(m, machinev1beta1.MachineDrainable, corev1.ConditionFalse, ManagerNodeProtectedReason, msg)
	events.Eventf(r.Recorder, m, corev1.EventTypeWarning, ManagerNodeProtectedReason, "%s", msg)
}
