package machinesetsync

import (
	"context"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/internal/ownedby"
	"github.com/machina-dev/machina/internal/controllers/sync/synccommon"
)

// The autoscaler marks the Machine it removes, then lowers replicas. The Machine sync carries
// the mark to the Machine's other copy (synccommon.CarryMark); a scale-down is carried over to
// the authoritative MachineSet only once every mark has arrived, or that MachineSet, seeing
// fewer replicas and no mark, would delete a Machine of its own choosing.

// marksPendingToCAPI reports a Machine API Machine of the set marked for deletion whose
// Cluster API copy does not carry cluster.x-k8s.io/delete-machine yet.
func (r *Reconciler) marksPendingToCAPI(ctx context.Context, mapi *machinev1beta1.MachineSet) (bool, error) {
	var list machinev1beta1.MachineList
	if err := ownedby.List(ctx, r.Client, &list, mapi.Namespace, mapi.UID, client.UnsafeDisableDeepCopy); err != nil {
		return false, err
	}
	for i := range list.Items {
		m := &list.Items[i]
		if !m.DeletionTimestamp.IsZero() || !synccommon.Marked(m.Annotations, synccommon.MachineAPIDeleteMarks) {
			continue
		}
		other := &clusterv1.Machine{}
		found, err := r.getMachine(ctx, client.ObjectKey{Namespace: r.Namespaces.ClusterAPI, Name: m.Name}, other)
		if err != nil {
			return false, err
		}
		if found && !synccommon.Marked(other.Annotations, synccommon.ClusterAPIDeleteMarks) {
			return true, nil
		}
	}
	return false, nil
}

// marksPendingToMAPI reports a Cluster API Machine of the set marked for deletion whose
// Machine API copy carries neither machine.openshift.io/delete-machine nor the older key yet.
func (r *Reconciler) marksPendingToMAPI(ctx context.Context, capi *clusterv1.MachineSet) (bool, error) {
	var list clusterv1.MachineList
	if err := ownedby.List(ctx, r.Client, &list, capi.Namespace, capi.UID, client.UnsafeDisableDeepCopy); err != nil {
		return false, err
	}
	for i := range list.Items {
		m := &list.Items[i]
		if !m.DeletionTimestamp.IsZero() || !synccommon.Marked(m.Annotations, synccommon.ClusterAPIDeleteMarks) {
			continue
		}
		other := &machinev1beta1.Machine{}
		found, err := r.getMachine(ctx, client.ObjectKey{Namespace: r.Namespaces.MachineAPI, Name: m.Name}, other)
		if err != nil {
			return false, err
		}
		if found && !synccommon.Marked(other.Annotations, synccommon.MachineAPIDeleteMarks) {
			return true, nil
		}
	}
	return false, nil
}
