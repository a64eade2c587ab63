package machinesetsync

import (
	"context"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
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
	return r.marksPending(ctx, mapi, &machinev1beta1.MachineList{}, synccommon.MachineAPIDeleteMarks,
		r.Namespaces.ClusterAPI, &clusterv1.Machine{}, synccommon.ClusterAPIDeleteMarks)
}

// marksPendingToMAPI reports a Cluster API Machine of the set marked for deletion whose
// Machine API copy carries neither machine.openshift.io/delete-machine nor the older key yet.
func (r *Reconciler) marksPendingToMAPI(ctx context.Context, capi *clusterv1.MachineSet) (bool, error) {
	return r.marksPending(ctx, capi, &clusterv1.MachineList{}, synccommon.ClusterAPIDeleteMarks,
		r.Namespaces.MachineAPI, &machinev1beta1.Machine{}, synccommon.MachineAPIDeleteMarks)
}

// marksPending lists the Machines set owns (into list), and reports one marked with any of
// keys, not being deleted, whose copy of the same name in otherNS (read into other) exists
// and carries none of otherKeys.
func (r *Reconciler) marksPending(ctx context.Context, set client.Object, list client.ObjectList, keys []string,
	otherNS string, other client.Object, otherKeys []string) (bool, error) {
	if err := ownedby.List(ctx, r.Client, list, set.GetNamespace(), set.GetUID(), client.UnsafeDisableDeepCopy); err != nil {
		return false, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return false, err
	}
	for _, item := range items {
		m, ok := item.(client.Object)
		if !ok || !m.GetDeletionTimestamp().IsZero() || !synccommon.Marked(m.GetAnnotations(), keys) {
			continue
		}
		found, err := r.getMachine(ctx, client.ObjectKey{Namespace: otherNS, Name: m.GetName()}, other)
		if err != nil {
			return false, err
		}
		if found && !synccommon.Marked(other.GetAnnotations(), otherKeys) {
			return true, nil
		}
	}
	return false, nil
}
