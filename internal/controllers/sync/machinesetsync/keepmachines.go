package machinesetsync

import (
	"context"
	"slices"
	"strings"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/patch"
)

// keepMachines lets go of the Machines of a deleted ClusterAPI-authoritative Machine API
// MachineSet that the Cluster API does not run (never migrated, or mid-handover): their
// controller reference to it is removed before the MachineSet's sync finalizer, so the garbage
// collector leaves them — deleting them would have the Machine API terminate their instances —
// and they stay as Machine API Machines without a MachineSet, while their Cluster API copies
// stay in the Cluster API MachineSet. The Machine API copies of the Machines the Cluster API
// runs go with the MachineSet; their deletion is not carried over (their MachineSet is gone), so
// their Cluster API Machines keep running.
func (r *Reconciler) keepMachines(ctx context.Context, ms *machinev1beta1.MachineSet, capi *clusterv1.MachineSet) error {
	var list machinev1beta1.MachineList
	if err := r.Client.List(ctx, &list, client.InNamespace(ms.Namespace)); err != nil {
		return err
	}
	var kept []string
	for i := range list.Items {
		m := &list.Items[i]
		wrote, err := patch.Locked(ctx, r.Client, m, func() bool {
			if m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityClusterAPI || !m.DeletionTimestamp.IsZero() {
				return false
			}
			refs := m.GetOwnerReferences()
			rest := slices.DeleteFunc(slices.Clone(refs), func(ref metav1.OwnerReference) bool { return ref.UID == ms.UID })
			m.SetOwnerReferences(rest)
			return len(rest) != len(refs)
		})
		if client.IgnoreNotFound(err) != nil {
			return err
		}
		if wrote {
			kept = append(kept, m.Name)
		}
	}
	if len(kept) > 0 {
		where := "no Cluster API MachineSet"
		if capi != nil {
			where = "Cluster API MachineSet " + capi.Namespace + "/" + capi.Name
		}
		r.event(ms, corev1.EventTypeNormal, "MachinesKept",
			"Machine API Machines %s are run by the Machine API and stay without a MachineSet; their Cluster API copies stay in %s",
			strings.Join(kept, ", "), where)
	}
	return nil
}
