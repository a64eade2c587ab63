package machinesync

import (
	"context"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// carryRemediation bridges a Cluster API MachineHealthCheck to a Machine the Machine API
// owns. The health check marks the paused Cluster API copy OwnerRemediated=False and waits
// for the owning MachineSet to replace it; that MachineSet is a paused mirror and never will.
// So the sync does on the authoritative side what the Machine API health check would do: it
// deletes the Machine API Machine, whose MachineSet then creates a replacement (the deletion
// reaches the Cluster API copy through the sync finalizer). Only Machines owned by a
// MachineSet are remediated, as in both APIs. It reports whether it deleted the Machine.
func (r *Reconciler) carryRemediation(ctx context.Context, mapi *machinev1beta1.Machine, capi *clusterv1.Machine) (bool, error) {
	c := meta.FindStatusCondition(capi.Status.Conditions, clusterv1.MachineOwnerRemediatedCondition)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != clusterv1.MachineOwnerRemediatedWaitingForRemediationReason {
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
