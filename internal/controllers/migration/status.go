package migration

import (
	"context"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/patch"
)

// authorityStatus points at the authority fields of a Machine API status (Machine and
// MachineSet have the same ones).
type authorityStatus struct {
	authority  *machinev1beta1.MachineAuthority
	synced     *machinev1beta1.SynchronizedAPI
	generation *int64
	conditions *[]machinev1beta1.Condition
}

// patchAuthority writes status.authoritativeAPI and synchronizedAPI, synchronizedGeneration
// when generation is not zero, and cond when given, in one optimistic-locked status patch.
func patchAuthority(ctx context.Context, c client.Client, obj client.Object, st authorityStatus,
	current, previous machinev1beta1.MachineAuthority, generation int64, cond *machinev1beta1.Condition) error {
	base := obj.DeepCopyObject().(client.Object)
	*st.authority = current
	*st.synced = machinev1beta1.SynchronizedAPI(previous)
	if generation > 0 {
		*st.generation = generation
	}
	if cond != nil {
		mapicond.Set(st.conditions, *cond)
	}
	// An acknowledged pause that goes on under another authority (Migrating → ClusterAPI,
	// ClusterAPI → Migrating) gets the gate's new message in this same write, which saves the
	// Machine API controller a write only to reword it. A pause not yet acknowledged is left
	// for that controller to report: its Paused=True is what the handover waits for.
	if current != machinev1beta1.MachineAuthorityMachineAPI && mapicond.IsTrue(*st.conditions, gate.PausedCondition) {
		if _, _, err := gate.MachineAPI(obj); err != nil {
			return err
		}
	}
	return patch.StoreStatus(ctx, c, obj, base)
}

// sideGeneration is the generation of one side's copy (the Machine API copy's when the
// Cluster API one does not exist).
func sideGeneration(side machinev1beta1.MachineAuthority, mapi, capi client.Object) int64 {
	if side == machinev1beta1.MachineAuthorityClusterAPI && capi != nil {
		return capi.GetGeneration()
	}
	return mapi.GetGeneration()
}

// sidePaused reports whether a side's controllers acknowledged the pause. A missing Cluster
// API copy (capiConds nil on the ClusterAPI side) has nothing to pause.
func sidePaused(side machinev1beta1.MachineAuthority, mapiConds []machinev1beta1.Condition, capiConds []metav1Condition, capiGeneration int64) (bool, string) {
	if side == machinev1beta1.MachineAuthorityMachineAPI {
		return mapiPaused(mapiConds)
	}
	if capiConds == nil && capiGeneration == 0 {
		return true, ""
	}
	return capiPaused(capiConds, capiGeneration)
}
