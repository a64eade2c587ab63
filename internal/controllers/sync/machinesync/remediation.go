package machinesync

import (
	"context"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/gate"
)

// carryRemediation bridges a Cluster API MachineHealthCheck to a Machine the Machine API
// owns. The health check marks the paused Cluster API copy OwnerRemediated=False and waits
// for the owning MachineSet to replace it; that MachineSet is a paused mirror and never will.
// So the sync does on the authoritative side what the Machine API health check would do: it
// deletes the Machine API Machine, whose MachineSet then creates a replacement (the deletion
// reaches the Cluster API copy through the sync finalizer). Only Machines owned by a
// MachineSet are remediated, as in both APIs. It reports whether it deleted the Machine.
func (r *Reconciler) carryRemediation(ctx context.Context, mapi *machinev1beta1.Machine, capi *clusterv1.Machine) (bool, error) {
	if !waitingForOwnerRemediation(capi) {
		return false, nil
	}
	owner := metav1.GetControllerOf(mapi)
	if owner == nil || owner.Kind != "MachineSet" || !mapi.DeletionTimestamp.IsZero() {
		return false, nil
	}
	if err := client.IgnoreNotFound(r.Client.Delete(ctx, mapi, client.Preconditions{UID: &mapi.UID})); err != nil {
		return false, err
	}
	r.event(mapi, corev1.EventTypeNormal, "RemediationCarriedOver",
		"Deleted for the Cluster API MachineHealthCheck that marked Machine %s/%s unhealthy; MachineSet %s replaces it",
		capi.Namespace, capi.Name, owner.Name)
	return true, nil
}

// remediateForPausedOwner does the same for a Machine the Cluster API owns while its
// MachineSet stays with the Machine API (the Machine was handed over alone): the Cluster API
// health check marks it OwnerRemediated=False and waits for the owning Cluster API
// MachineSet, a paused mirror that never acts. The sync deletes the authoritative Cluster API
// Machine, as its MachineSet would; the deletion reaches the Machine API copy through the sync
// finalizer, and the Machine API MachineSet creates the replacement. It reports whether it
// deleted the Machine.
func (r *Reconciler) remediateForPausedOwner(ctx context.Context, mapi *machinev1beta1.Machine, capi *clusterv1.Machine) (bool, error) {
	if !waitingForOwnerRemediation(capi) || !capi.DeletionTimestamp.IsZero() {
		return false, nil
	}
	owner := metav1.GetControllerOf(capi)
	if owner == nil || owner.Kind != "MachineSet" || owner.APIVersion != clusterv1.GroupVersion.String() {
		return false, nil
	}
	ms := &clusterv1.MachineSet{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: capi.Namespace, Name: owner.Name}, ms); err != nil || ms.UID != owner.UID {
		return false, client.IgnoreNotFound(err)
	}
	if !gate.HasPausedAnnotation(ms) {
		return false, nil // an active MachineSet remediates its own Machines
	}
	if err := client.IgnoreNotFound(r.Client.Delete(ctx, capi, client.Preconditions{UID: &capi.UID})); err != nil {
		return false, err
	}
	r.event(mapi, corev1.EventTypeNormal, "RemediationCarriedOver",
		"Deleted Cluster API Machine %s/%s, which a Cluster API MachineHealthCheck marked unhealthy, for its paused MachineSet %s; the Machine API MachineSet replaces it",
		capi.Namespace, capi.Name, owner.Name)
	return true, nil
}

// waitingForOwnerRemediation reports a Cluster API Machine a health check has marked for its
// owner to remediate.
func waitingForOwnerRemediation(capi *clusterv1.Machine) bool {
	c := meta.FindStatusCondition(capi.Status.Conditions, clusterv1.MachineOwnerRemediatedCondition)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == clusterv1.MachineOwnerRemediatedWaitingForRemediationReason
}
