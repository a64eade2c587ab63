package machinesync

import (
	"context"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/machina-dev/machina/internal/controllers/sync/internal/synccommon"
	"github.com/machina-dev/machina/internal/patch"
)

// carryMarkToCAPI: the Cluster API copy is authoritative. A delete-machine mark put on the
// Machine API mirror (the cluster autoscaler's scale-down, working with Machine API
// MachineSets) reaches the Cluster API Machine as cluster.x-k8s.io/delete-machine, so the
// Cluster API MachineSet deletes this Machine when the autoscaler lowers its replicas; removed
// from the mirror, it goes from the Cluster API Machine too (synccommon.CarryMark).
func (r *Reconciler) carryMarkToCAPI(ctx context.Context, mapi *machinev1beta1.Machine, capi *clusterv1.Machine) error {
	value, marked := synccommon.OwnMark(mapi, synccommon.MachineAPIDeleteMarks)
	base := capi.DeepCopy()
	if !synccommon.CarryMark(capi, value, marked, synccommon.ClusterAPIDeleteMarks) {
		return nil
	}
	if err := patch.Store(ctx, r.Client, capi, base); err != nil {
		return err
	}
	r.event(mapi, corev1.EventTypeNormal, "AutoscalerDeleteMark", "%s", markMessage(marked, synccommon.ClusterAPIDeleteMarks[0]))
	return nil
}

// carryMarkToMAPI: the Machine API copy is authoritative. A cluster.x-k8s.io/delete-machine
// mark put on the paused Cluster API mirror (the autoscaler working with Cluster API
// MachineSets) reaches the Machine API Machine as machine.openshift.io/delete-machine, which
// its MachineSet deletes first when the autoscaler's replicas reach it. The copy is written
// with the rest of the pass (synccommon.Scope).
func carryMarkToMAPI(s *synccommon.Scope, mapi *machinev1beta1.Machine, capi *clusterv1.Machine) {
	value, marked := synccommon.OwnMark(capi, synccommon.ClusterAPIDeleteMarks)
	if synccommon.CarryMark(mapi, value, marked, synccommon.MachineAPIDeleteMarks) {
		s.Eventf(corev1.EventTypeNormal, "AutoscalerDeleteMark", "%s", markMessage(marked, synccommon.MachineAPIDeleteMarks[0]))
	}
}

// markMessage tells of a delete mark carried to the authoritative copy as key, or removed.
func markMessage(marked bool, key string) string {
	if marked {
		return "Carried the delete-machine mark of the mirror to the authoritative copy as " + key
	}
	return "The mirror's delete-machine mark is gone: removed " + key + " from the authoritative copy"
}
