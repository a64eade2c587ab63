package machinesync

import (
	"context"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/sync/synccommon"
	"github.com/machina-dev/machina/internal/patch"
)

// carryMarkToCAPI: the Cluster API copy is authoritative. A delete-machine mark put on the
// Machine API mirror (the cluster autoscaler's scale-down, working with Machine API
// MachineSets) reaches the Cluster API Machine as cluster.x-k8s.io/delete-machine, so the
// Cluster API MachineSet deletes this Machine when the autoscaler lowers its replicas; removed
// from the mirror, it goes from the Cluster API Machine too (synccommon.CarryMark).
func (r *Reconciler) carryMarkToCAPI(ctx context.Context, mapi *machinev1beta1.Machine, capi *clusterv1.Machine) error {
	value, marked := synccommon.OwnMark(mapi, synccommon.MachineAPIDeleteMarks)
	return r.carryMark(ctx, mapi, capi, value, marked, synccommon.ClusterAPIDeleteMarks)
}

// carryMarkToMAPI: the Machine API copy is authoritative. A cluster.x-k8s.io/delete-machine
// mark put on the paused Cluster API mirror (the autoscaler working with Cluster API
// MachineSets) reaches the Machine API Machine as machine.openshift.io/delete-machine, which
// its MachineSet deletes first when the autoscaler's replicas reach it.
func (r *Reconciler) carryMarkToMAPI(ctx context.Context, mapi *machinev1beta1.Machine, capi *clusterv1.Machine) error {
	value, marked := synccommon.OwnMark(capi, synccommon.ClusterAPIDeleteMarks)
	return r.carryMark(ctx, mapi, mapi, value, marked, synccommon.MachineAPIDeleteMarks)
}

// carryMark stores the authoritative copy to with its mark brought in line with the mirror's,
// and tells it on the Machine API copy.
func (r *Reconciler) carryMark(ctx context.Context, mapi *machinev1beta1.Machine, to client.Object, value string, marked bool, keys []string) error {
	base := to.DeepCopyObject().(client.Object)
	if !synccommon.CarryMark(to, value, marked, keys) {
		return nil
	}
	if err := patch.Store(ctx, r.Client, to, base); err != nil {
		return err
	}
	if marked {
		r.event(mapi, corev1.EventTypeNormal, "AutoscalerDeleteMark", "Carried the delete-machine mark of the mirror to the authoritative copy as %s", keys[0])
	} else {
		r.event(mapi, corev1.EventTypeNormal, "AutoscalerDeleteMark", "The mirror's delete-machine mark is gone: removed %s from the authoritative copy", keys[0])
	}
	return nil
}
