package machinesync_test

import (
	"testing"

	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/authority"
	st "github.com/machina-dev/machina/internal/controllers/sync/internal/synctest"
)

// The deletion rows of the rule table for Machines. What the fake API server cannot do — the
// garbage collector taking an InfraMachine or a MachineSet's Machines along, admission — is
// left to the lab suites (internal/controllers/sync TestSync, config/admission).
//
// The design's rows "Machine API | Delete | mirror | no owner: the Cluster API Machine
// remains" and footnote 8 speak of a non-authoritative Machine API copy; docs/migration.md
// says so ("deleting a non-authoritative standalone copy ... leaves the other API's resource
// running on its own", while "Deleting the authoritative copy ... deletes the mirror"), and the
// rows below follow it.
func TestMachineDeletionRules(t *testing.T) {
	syncF := authority.SyncFinalizer
	machines.Run(t, []st.Row{
		{
			// Machine API | Delete | mirror | owner: the Cluster API copy is deleted with it.
			Name: "ClusterAPIAuthoritative_OwnedMachineAPICopyDeleted_ClusterAPIMachineDeleted",
			Before: func(t *testing.T) []client.Object {
				ms := mapiSet("ms")
				m := mapiMachine("m", st.Decided(st.ClusterAPI), ownedBy(ms))
				c, _ := capiCopy(t, m)
				return []client.Object{ms, st.Deleting(st.WithFinalizers(m, syncF)), st.WithFinalizers(c, syncF)}
			},
			Req: "m",
			Want: []st.Check{
				st.Absent(&clusterv1.Machine{}, capiNS, "m"),
				st.Absent(&machinev1beta1.Machine{}, mapiNS, "m"),
				st.EventSeen("MirrorDeleted"),
			},
		},
		{
			// The same while the authoritative Cluster API controller still works on the
			// instance: the deletion is requested and the sync waits for it, keeping its
			// finalizer on both copies.
			Name: "ClusterAPIAuthoritative_OwnedMachineAPICopyDeleted_WaitsForClusterAPIController",
			Before: func(t *testing.T) []client.Object {
				ms := mapiSet("ms")
				m := mapiMachine("m", st.Decided(st.ClusterAPI), ownedBy(ms))
				c, _ := capiCopy(t, m)
				return []client.Object{ms, st.Deleting(st.WithFinalizers(m, syncF)), st.WithFinalizers(c, syncF, clusterv1.MachineFinalizer)}
			},
			Req: "m",
			Want: []st.Check{
				st.BeingDeleted(&clusterv1.Machine{}, capiNS, "m", syncF, clusterv1.MachineFinalizer),
				st.BeingDeleted(&machinev1beta1.Machine{}, mapiNS, "m", syncF),
				st.Requeued(),
			},
		},
		{
			// docs/migration.md: the ControlPlaneMachineSet counts as an owner whose deletions
			// are carried over, so a migrated master it replaces does not keep its instance.
			Name: "ClusterAPIAuthoritative_ControlPlaneMachineSetDeletedMaster_ClusterAPIMachineDeleted",
			Before: func(t *testing.T) []client.Object {
				cpms := &machinev1.ControlPlaneMachineSet{ObjectMeta: metav1.ObjectMeta{Name: "cluster", Namespace: mapiNS, UID: "cpms"}}
				m := mapiMachine("master-0", st.Decided(st.ClusterAPI))
				m.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(cpms, machinev1.GroupVersion.WithKind("ControlPlaneMachineSet"))}
				c, _ := capiCopy(t, m)
				return []client.Object{cpms, st.Deleting(st.WithFinalizers(m, syncF)), st.WithFinalizers(c, syncF)}
			},
			Req: "master-0",
			Want: []st.Check{
				st.Absent(&clusterv1.Machine{}, capiNS, "master-0"),
				st.Absent(&machinev1beta1.Machine{}, mapiNS, "master-0"),
			},
		},
		{
			// Machine API | Delete | mirror | no owner, Cluster API authoritative: the Cluster
			// API Machine remains, running, let go by the sync.
			Name: "ClusterAPIAuthoritative_StandaloneMachineAPICopyDeleted_ClusterAPIMachineRemains",
			Before: func(t *testing.T) []client.Object {
				m := mapiMachine("m", st.Decided(st.ClusterAPI))
				c, _ := capiCopy(t, m)
				return []client.Object{st.Deleting(st.WithFinalizers(m, syncF, machinev1beta1.MachineFinalizer)), st.WithFinalizers(c, syncF, clusterv1.MachineFinalizer)}
			},
			Req: "m",
			Want: []st.Check{
				st.Absent(&machinev1beta1.Machine{}, mapiNS, "m"),
				st.Kept(&clusterv1.Machine{}, capiNS, "m", []string{clusterv1.MachineFinalizer}, []string{syncF}),
				st.EventSeen("DeletionNotSynchronised"),
			},
		},
		{
			// Footnote 8: Machines going because their non-authoritative parent is deleted are
			// not carried over: an owner being deleted counts as no owner.
			Name: "ClusterAPIAuthoritative_ParentBeingDeleted_ClusterAPIMachineRemains",
			Before: func(t *testing.T) []client.Object {
				ms := st.Deleting(st.WithFinalizers(mapiSet("ms"), syncF))
				m := mapiMachine("m", st.Decided(st.ClusterAPI), ownedBy(ms))
				c, _ := capiCopy(t, m)
				return []client.Object{ms, st.Deleting(st.WithFinalizers(m, syncF)), st.WithFinalizers(c, syncF)}
			},
			Req: "m",
			Want: []st.Check{
				st.Absent(&machinev1beta1.Machine{}, mapiNS, "m"),
				st.Kept(&clusterv1.Machine{}, capiNS, "m", nil, []string{syncF}),
			},
		},
		{
			// docs/migration.md: deleting the authoritative Machine API copy deletes its paused
			// mirror, owned or not, and lets go of the paused controller's finalizer.
			Name: "MachineAPIAuthoritative_StandaloneDeleted_MirrorDeleted",
			Before: func(t *testing.T) []client.Object {
				m := mapiMachine("m", st.Decided(st.MachineAPI))
				c, _ := capiCopy(t, m)
				return []client.Object{st.Deleting(st.WithFinalizers(m, syncF)), st.WithFinalizers(st.Paused(c), syncF, clusterv1.MachineFinalizer)}
			},
			Req: "m",
			Want: []st.Check{
				st.Absent(&clusterv1.Machine{}, capiNS, "m"),
				st.Absent(&machinev1beta1.Machine{}, mapiNS, "m"),
			},
		},
		{
			// ... once the Machine API controller has finished with the instance: until then
			// the mirror's deletion is requested and the sync waits.
			Name: "MachineAPIAuthoritative_Deleted_WaitsForMachineAPIController",
			Before: func(t *testing.T) []client.Object {
				m := mapiMachine("m", st.Decided(st.MachineAPI))
				c, _ := capiCopy(t, m)
				return []client.Object{st.Deleting(st.WithFinalizers(m, syncF, machinev1beta1.MachineFinalizer)), st.WithFinalizers(st.Paused(c), syncF)}
			},
			Req: "m",
			Want: []st.Check{
				st.BeingDeleted(&clusterv1.Machine{}, capiNS, "m", syncF),
				st.BeingDeleted(&machinev1beta1.Machine{}, mapiNS, "m", syncF, machinev1beta1.MachineFinalizer),
				st.Requeued(),
			},
		},
		{
			// Cluster API | Delete | mirror | owner: its MachineSet scaled it away (or
			// remediated it); the Machine API copy is deleted too.
			Name: "MachineAPIAuthoritative_OwnedMirrorDeleted_MachineAPICopyDeleted",
			Before: func(t *testing.T) []client.Object {
				ms, cs := mapiSet("ms"), st.WithFinalizers(st.Paused(capiSet("ms")), syncF)
				m := mapiMachine("m", st.Decided(st.MachineAPI), ownedBy(ms))
				c, _ := capiCopy(t, m)
				c.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(cs, clusterv1.GroupVersion.WithKind("MachineSet"))}
				return []client.Object{ms, cs, st.WithFinalizers(m, syncF), st.Deleting(st.WithFinalizers(st.Paused(c), syncF))}
			},
			Req: "m",
			Want: []st.Check{
				st.Absent(&machinev1beta1.Machine{}, mapiNS, "m"),
				st.Absent(&clusterv1.Machine{}, capiNS, "m"),
			},
		},
		{
			// Cluster API | Delete | mirror | no owner: the deletion is not carried over (a
			// control-plane Machine, footnote 9); the mirror is recreated.
			// (Its InfraMachine, which the garbage collector takes along with it, is gone.)
			Name: "MachineAPIAuthoritative_StandaloneMirrorDeleted_Recreated",
			Before: func(t *testing.T) []client.Object {
				m := mapiMachine("m", st.Decided(st.MachineAPI))
				c, _ := capiCopy(t, m)
				return []client.Object{st.WithFinalizers(m, syncF), st.Deleting(st.WithFinalizers(st.Paused(c), syncF, clusterv1.MachineFinalizer))}
			},
			Req: "m",
			Want: []st.Check{
				st.AuthorityIs("m", st.MachineAPI, true),
				clusterAPICopy("m", true, zoneA, large),
				infraCopy("m", true, true),
				st.Synchronized("m", 1),
				st.EventSeen("MirrorRecreated"),
			},
		},
		{
			// docs/migration.md: while the collector has yet to remove the InfraMachine of the
			// deleted copy, the new copy does not adopt it: Synchronized=False names its owner.
			Name: "MirrorRecreated_LeftoverInfraMachineOfDeletedCopy_NotAdopted",
			Before: func(t *testing.T) []client.Object {
				m := mapiMachine("m", st.Decided(st.MachineAPI))
				c, sm := capiCopy(t, m)
				return []client.Object{st.WithFinalizers(m, syncF), st.Deleting(st.WithFinalizers(st.Paused(c), syncF)), st.Paused(sm)}
			},
			Req: "m",
			Want: []st.Check{
				st.NotSynchronized("m", authority.MirrorWriteFailedReason, 0, "capi-machine-m"),
				st.ControlledBy(&infrav1.SimMachine{}, capiNS, "m", "capi-machine-m"),
				st.Requeued(),
			},
		},
		{
			// docs/migration.md: deleting the authoritative Cluster API copy deletes the Machine
			// API one, rather than the sync creating it again from it.
			Name: "ClusterAPIAuthoritative_ClusterAPIMachineDeleted_MachineAPICopyDeleted",
			Before: func(t *testing.T) []client.Object {
				m := mapiMachine("m", st.Decided(st.ClusterAPI))
				c, _ := capiCopy(t, m)
				return []client.Object{st.WithFinalizers(m, syncF), st.Deleting(st.WithFinalizers(c, syncF))}
			},
			Req: "m",
			Want: []st.Check{
				st.Absent(&machinev1beta1.Machine{}, mapiNS, "m"),
				st.Absent(&clusterv1.Machine{}, capiNS, "m"),
			},
		},
		{
			// A paused mirror whose Machine API copy is gone without carrying its deletion over
			// (its sync finalizer removed by hand) is deleted and released.
			Name: "MachineAPICopyGone_PausedMirror_DeletedAndReleased",
			Before: func(t *testing.T) []client.Object {
				c, _ := capiCopy(t, mapiMachine("m"))
				return []client.Object{st.WithFinalizers(st.Paused(c), syncF, clusterv1.MachineFinalizer)}
			},
			Req: "m",
			Want: []st.Check{
				st.Absent(&clusterv1.Machine{}, capiNS, "m"),
				st.Absent(&machinev1beta1.Machine{}, mapiNS, "m"),
			},
		},
		{
			// docs/migration.md: deleting the Machine API copy never takes someone else's
			// active Cluster API Machine of its name along.
			Name: "MachineAPICopyDeletedBesideNotMirror_ClusterAPIMachineUntouched",
			Before: func(t *testing.T) []client.Object {
				m := mapiMachine("m", st.Decided(st.MachineAPI))
				c, sm := capiCopy(t, mapiMachine("m", placed(zoneC, xlarge)))
				return []client.Object{st.Deleting(st.WithFinalizers(m, syncF)), c, sm}
			},
			Req: "m",
			Want: []st.Check{
				st.Absent(&machinev1beta1.Machine{}, mapiNS, "m"),
				st.NoWritesIn(capiNS),
			},
		},
		{
			// A handover under way settles its own deletions (the migration controller).
			Name: "Migrating_ClusterAPICopyDeleted_LeftToMigration",
			Before: func(t *testing.T) []client.Object {
				m := mapiMachine("m", st.Migrating())
				c, _ := capiCopy(t, m)
				return []client.Object{st.WithFinalizers(m, syncF), st.Deleting(st.WithFinalizers(c, syncF))}
			},
			Req: "m",
			Want: []st.Check{
				st.NoWritesIn(capiNS),
				st.NoWritesIn(mapiNS),
			},
		},
	})
}
