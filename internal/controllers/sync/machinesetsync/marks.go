package machinesetsync

import (
	"context"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/sync/internal/synccommon"
)

// The autoscaler marks the Machine it removes, then lowers replicas. The Machine sync carries
// the mark to the Machine's other copy (synccommon.CarryMark); a scale-down is carried over to
// the authoritative MachineSet only once every mark has arrived, or that MachineSet, seeing
// fewer replicas and no mark, would delete a Machine of its own choosing.
//
// The marked Machines are read from the API server, not the cache: the Machine informer and
// the MachineSet informer deliver independently, so the pass the scale-down starts may find
// the Machine in the cache as it was before the mark (seen in TestAutoscalerOnMirrors). A
// copy found unmarked in the cache only delays the scale-down by a retry.

// marksPendingToCAPI reports a Machine API Machine of the set marked for deletion whose
// Cluster API copy does not carry cluster.x-k8s.io/delete-machine yet.
func (r *Reconciler) marksPendingToCAPI(ctx context.Context, mapi *machinev1beta1.MachineSet) (bool, error) {
	return r.marksPending(ctx, mapi, &mapi.Spec.Selector, &machinev1beta1.MachineList{}, synccommon.MachineAPIDeleteMarks,
		r.Namespaces.ClusterAPI, &clusterv1.Machine{}, synccommon.ClusterAPIDeleteMarks)
}

// marksPendingToMAPI reports a Cluster API Machine of the set marked for deletion whose
// Machine API copy carries neither machine.openshift.io/delete-machine nor the older key yet.
func (r *Reconciler) marksPendingToMAPI(ctx context.Context, capi *clusterv1.MachineSet) (bool, error) {
	return r.marksPending(ctx, capi, &capi.Spec.Selector, &clusterv1.MachineList{}, synccommon.ClusterAPIDeleteMarks,
		r.Namespaces.MachineAPI, &machinev1beta1.Machine{}, synccommon.MachineAPIDeleteMarks)
}

// marksPending lists (live, into list) the Machines set selects and controls, and reports one
// marked with any of keys, not being deleted, whose copy of the same name in otherNS (read
// into other) exists and carries none of otherKeys.
func (r *Reconciler) marksPending(ctx context.Context, set client.Object, selector *metav1.LabelSelector, list client.ObjectList,
	keys []string, otherNS string, other client.Object, otherKeys []string) (bool, error) {
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return false, err
	}
	if err := r.APIReader.List(ctx, list, client.InNamespace(set.GetNamespace()), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return false, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return false, err
	}
	for _, item := range items {
		m, ok := item.(client.Object)
		if !ok || !metav1.IsControlledBy(m, set) || !m.GetDeletionTimestamp().IsZero() || !synccommon.Marked(m.GetAnnotations(), keys) {
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
