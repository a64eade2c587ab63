package machinesync_test

import (
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/controllers/sync/internal/synccommon"
	st "github.com/machina-dev/machina/internal/controllers/sync/internal/synctest"
)

// The creation rows of the migration design's rule table ("Summary of the rules outlined
// above", seed 000) for Machines, with the Paused/Synchronized behaviour and the refinements
// docs/migration.md makes (an empty authority is decided from the spec alone; someone else's
// active Cluster API Machine is never taken over). Every row also proves the steady state: the
// last pass of a settled row wrote nothing.
func TestMachineCreationRules(t *testing.T) {
	machines.Run(t, []st.Row{
		{
			// Machine API | MachineAPI | Create | no mirror: the Cluster API copy and its
			// InfraMachine are created paused, and Synchronized is reported with the generation.
			Name:   "MachineAPI_NoMirror_PausedCopyCreated",
			Before: st.Objs(mapiMachine("m", st.Requested(st.MachineAPI), st.Generation(3))),
			Req:    "m",
			Want: []st.Check{
				st.AuthorityIs("m", st.MachineAPI, true),
				clusterAPICopy("m", true, zoneA, large),
				infraCopy("m", true, true),
				st.Synchronized("m", 3),
				bootstrapSecret(),
				st.EventSeen("MirrorCreated"),
			},
		},
		{
			// Machine API | '' | Create | no mirror: the authority is decided MachineAPI, then
			// as above.
			Name:   "EmptyAuthority_NoMirror_DecidedMachineAPI",
			Before: st.Objs(mapiMachine("m")),
			Req:    "m",
			Want: []st.Check{
				st.AuthorityIs("m", st.MachineAPI, true),
				st.SynchronizedAPIIs("m", machinev1beta1.MachineAPISynchronized),
				clusterAPICopy("m", true, zoneA, large),
				infraCopy("m", true, true),
				st.Synchronized("m", 1),
			},
		},
		{
			// Machine API | '' | Create | mirror: the design says ClusterAPI; docs/migration.md
			// decides from the spec alone ("A Cluster API resource of the same name that
			// already exists does not change that decision"), and a paused Cluster API Machine
			// without the sync finalizer is given up to the sync and overwritten.
			Name: "EmptyAuthority_PausedLeftoverCopy_DecidedMachineAPIAndOverwritten",
			Before: func(t *testing.T) []client.Object {
				m := mapiMachine("m")
				c, sm := capiCopy(t, mapiMachine("m", placed(zoneC, xlarge)))
				return []client.Object{m, st.Paused(c), st.Paused(sm)}
			},
			Req: "m",
			Want: []st.Check{
				st.AuthorityIs("m", st.MachineAPI, true),
				clusterAPICopy("m", true, zoneA, large),
				infraCopy("m", true, true),
				st.Synchronized("m", 1),
			},
		},
		{
			// Machine API | ClusterAPI | Create | no mirror: the Cluster API copy is created
			// unpaused (it is the authoritative one from birth), and later syncs run back.
			Name:   "ClusterAPI_NoMirror_UnpausedCopyCreated",
			Before: st.Objs(mapiMachine("m", st.Requested(st.ClusterAPI))),
			Req:    "m",
			Want: []st.Check{
				st.AuthorityIs("m", st.ClusterAPI, true),
				clusterAPICopy("m", false, zoneA, large),
				infraCopy("m", false, true),
				providerSpecIs("m", zoneA, large),
				st.Synchronized("m", 1),
			},
		},
		{
			// Machine API | ClusterAPI | Create | mirror: the Cluster API spec is converted onto
			// the Machine API copy; the Cluster API copy is not rewritten, only paired (the
			// sync finalizer), and stays active.
			Name: "ClusterAPI_WithMirror_ClusterAPISpecConvertedOntoMachineAPI",
			Before: func(t *testing.T) []client.Object {
				c, sm := capiCopy(t, mapiMachine("m", placed(zoneC, xlarge)))
				c.Generation = 4
				return []client.Object{mapiMachine("m", st.Requested(st.ClusterAPI)), c, sm}
			},
			Req: "m",
			Want: []st.Check{
				st.AuthorityIs("m", st.ClusterAPI, true),
				providerSpecIs("m", zoneC, xlarge),
				st.Synchronized("m", 4),
				clusterAPICopy("m", false, zoneC, xlarge),
				infraCopy("m", false, false),
			},
		},
		{
			// Cluster API | ClusterAPI | update | mirror: a change of the authoritative Cluster
			// API Machine reaches its Machine API copy.
			Name: "ClusterAPI_PairedCopyChanged_ChangeReachesMachineAPI",
			Before: func(t *testing.T) []client.Object {
				m := st.WithFinalizers(mapiMachine("m", st.Decided(st.ClusterAPI), st.SyncedAt(6)), authority.SyncFinalizer)
				c, sm := capiCopy(t, mapiMachine("m", placed(zoneB, xlarge)))
				c.Generation = 7
				return []client.Object{m, st.WithFinalizers(c, authority.SyncFinalizer), sm}
			},
			Req: "m",
			Want: []st.Check{
				providerSpecIs("m", zoneB, xlarge),
				st.Synchronized("m", 7),
				clusterAPICopy("m", false, zoneB, xlarge),
			},
		},
		{
			// docs/migration.md, pairing: a paused Cluster API Machine the Machine API copy
			// names authoritative would never be unpaused by anyone else; the sync unpauses it
			// and its InfraMachine, each with its controller's finalizer.
			Name: "ClusterAPI_PausedCopyNeverPaired_UnpausedAtPairing",
			Before: func(t *testing.T) []client.Object {
				c, sm := capiCopy(t, mapiMachine("m"))
				return []client.Object{mapiMachine("m", st.Decided(st.ClusterAPI)), st.Paused(c), st.Paused(sm)}
			},
			Req: "m",
			Want: []st.Check{
				clusterAPICopy("m", false, zoneA, large),
				infraCopy("m", false, false),
				st.HasFinalizers(&clusterv1.Machine{}, "m", clusterv1.MachineFinalizer),
				st.HasFinalizers(&infrav1.SimMachine{}, "m", infrav1.SimMachineFinalizer),
				st.EventSeen(synccommon.UnpausedAtPairingReason),
				st.Synchronized("m", 1),
			},
		},
		{
			// Cluster API | MachineAPI | mirror: drift on the paused copy and its InfraMachine
			// is overwritten from the Machine API; labels the sync never copied stay.
			Name: "MachineAPI_DriftOnPausedMirror_Overwritten",
			Before: func(t *testing.T) []client.Object {
				m := st.WithFinalizers(mapiMachine("m", st.Decided(st.MachineAPI), st.Generation(2), st.SyncedAt(2)), authority.SyncFinalizer)
				c, sm := capiCopy(t, mapiMachine("m", placed(zoneC, xlarge)))
				c.Labels["someone.example.com/own"] = "kept"
				sm.Annotations = map[string]string{authority.MirrorOfAnnotation: "Machine/m"}
				return []client.Object{m, st.WithFinalizers(st.Paused(c), authority.SyncFinalizer), st.Paused(sm)}
			},
			Req: "m",
			Want: []st.Check{
				clusterAPICopy("m", true, zoneA, large),
				infraCopy("m", true, true),
				st.LabelIs(&clusterv1.Machine{}, capiNS, "m", "someone.example.com/own", "kept"),
				st.Synchronized("m", 2),
			},
		},
		{
			// A mirror someone unpaused (past admission) while the Machine API is authoritative
			// is paused again, with its InfraMachine.
			Name: "MachineAPI_MirrorUnpaused_PausedAgain",
			Before: func(t *testing.T) []client.Object {
				m := st.WithFinalizers(mapiMachine("m", st.Decided(st.MachineAPI)), authority.SyncFinalizer)
				c, sm := capiCopy(t, m)
				return []client.Object{m, st.WithFinalizers(c, authority.SyncFinalizer), sm}
			},
			Req: "m",
			Want: []st.Check{
				clusterAPICopy("m", true, zoneA, large),
				infraCopy("m", true, true),
			},
		},
		{
			// A field the Cluster API cannot carry (another region than the cluster's):
			// Synchronized=False naming the field, and nothing at all is written on the Cluster
			// API side (no partial mirror).
			Name:   "Unconvertible_NoMirror_SynchronizedFalseNothingWritten",
			Before: st.Objs(mapiMachine("m", st.Requested(st.MachineAPI), inRegion("sim-west-1"))),
			Req:    "m",
			Want: []st.Check{
				st.NotSynchronized("m", authority.ConversionFailedReason, 0, "spec.providerSpec.value.region"),
				st.Absent(&clusterv1.Machine{}, capiNS, "m"),
				st.Absent(&infrav1.SimMachine{}, capiNS, "m"),
				st.NoWritesIn(capiNS),
				st.EventSeen(authority.ConversionFailedReason),
			},
		},
		{
			// The same for a change of a mirrored Machine: the mirror keeps the last spec that
			// converted, and synchronizedGeneration stays at its generation.
			Name: "Unconvertible_Change_MirrorKeptAsLastSynchronized",
			Before: func(t *testing.T) []client.Object {
				c, sm := capiCopy(t, mapiMachine("m"))
				m := mapiMachine("m", st.Decided(st.MachineAPI), inRegion("sim-west-1"), st.Generation(5), st.SyncedAt(4))
				return []client.Object{st.WithFinalizers(m, authority.SyncFinalizer), st.WithFinalizers(st.Paused(c), authority.SyncFinalizer), st.Paused(sm)}
			},
			Req: "m",
			Want: []st.Check{
				st.NotSynchronized("m", authority.ConversionFailedReason, 4, "spec.providerSpec.value.region"),
				st.NoWritesIn(capiNS),
			},
		},
		{
			// docs/migration.md: an active Cluster API Machine without the sync finalizer is
			// someone else's. The sync writes nothing to it or its InfraMachine, does not pair
			// the Machine API copy, and reports the conflict.
			Name: "NotMirror_ActiveClusterAPIMachine_LeftAloneReported",
			Before: func(t *testing.T) []client.Object {
				c, sm := capiCopy(t, mapiMachine("m", placed(zoneC, xlarge)))
				return []client.Object{mapiMachine("m", st.Requested(st.MachineAPI)), c, sm}
			},
			Req: "m",
			Want: []st.Check{
				st.AuthorityIs("m", st.MachineAPI, false),
				st.NotSynchronized("m", authority.ClusterAPIMachineNotMirrorReason, 0, capiNS+"/m"),
				st.NoWritesIn(capiNS),
				st.EventSeen(authority.ClusterAPIMachineNotMirrorReason),
			},
		},
		{
			// The same when the active Cluster API resource is the namesake of the Machine's
			// MachineSet, which would adopt a mirror its selector matches.
			Name: "NotMirror_ActiveClusterAPIMachineSetOfItsSet_NotMirrored",
			Before: func(*testing.T) []client.Object {
				ms := mapiSet("ms")
				return []client.Object{ms, capiSet("ms"), mapiMachine("m", st.Requested(st.MachineAPI), ownedBy(ms))}
			},
			Req: "m",
			Want: []st.Check{
				st.NotSynchronized("m", authority.ClusterAPIMachineSetNotMirrorReason, 0, capiNS+"/ms"),
				st.Absent(&clusterv1.Machine{}, capiNS, "m"),
				st.NoWritesIn(capiNS),
			},
		},
		{
			// A Machine of a mirrored MachineSet: its Cluster API copy is controlled by the
			// Cluster API MachineSet mirror.
			Name: "MachineAPI_OwnedByMirroredSet_CopyOwnedBySetMirror",
			Before: func(*testing.T) []client.Object {
				ms := mapiSet("ms")
				cs := st.WithFinalizers(st.Paused(capiSet("ms")), authority.SyncFinalizer)
				return []client.Object{ms, cs, mapiMachine("m", st.Requested(st.MachineAPI), ownedBy(ms))}
			},
			Req: "m",
			Want: []st.Check{
				clusterAPICopy("m", true, zoneA, large),
				st.ControlledBy(&clusterv1.Machine{}, capiNS, "m", "capi-set-ms"),
				st.Synchronized("m", 1),
			},
		},
		{
			// While a handover from the Machine API is under way the spec keeps flowing from
			// it, and the pause is the migration controller's: an unpaused copy stays unpaused.
			Name: "Migrating_FromMachineAPI_SpecSyncedPauseLeftAlone",
			Before: func(t *testing.T) []client.Object {
				m := st.WithFinalizers(mapiMachine("m", st.Migrating(), st.Generation(2), st.SyncedAt(1)), authority.SyncFinalizer)
				c, sm := capiCopy(t, mapiMachine("m", placed(zoneB, xlarge)))
				return []client.Object{m, st.WithFinalizers(c, authority.SyncFinalizer), sm}
			},
			Req: "m",
			Want: []st.Check{
				st.AuthorityIs("m", machinev1beta1.MachineAuthorityMigrating, true),
				clusterAPICopy("m", false, zoneA, large),
				infraCopy("m", false, true),
				st.Synchronized("m", 2),
			},
		},
		{
			// A copy missing mid-handover is created paused: the migration controller unpauses.
			Name:   "Migrating_NoCopy_CreatedPaused",
			Before: st.Objs(st.WithFinalizers(mapiMachine("m", st.Migrating()), authority.SyncFinalizer)),
			Req:    "m",
			Want: []st.Check{
				clusterAPICopy("m", true, zoneA, large),
				infraCopy("m", true, true),
			},
		},
		{
			// Cluster API | - | Create | no Machine API copy: the sync takes no action.
			Name: "ClusterAPIOnly_NoAction",
			Before: func(t *testing.T) []client.Object {
				c, sm := capiCopy(t, mapiMachine("loner"))
				return []client.Object{c, sm}
			},
			Req: "loner",
			Want: []st.Check{
				st.Absent(&machinev1beta1.Machine{}, mapiNS, "loner"),
				st.NoWritesIn(capiNS),
				st.NoWritesIn(mapiNS),
			},
		},
		{
			// docs/migration.md: unless its MachineSet is mirrored in the Machine API, which
			// then shows it as a Cluster API-authoritative Machine of the Machine API set.
			Name: "ClusterAPIOnly_OwnedByMirroredSet_MachineAPICopyCreated",
			Before: func(t *testing.T) []client.Object {
				ms, cs := mapiSet("ms"), st.WithFinalizers(capiSet("ms"), authority.SyncFinalizer)
				c, sm := capiCopy(t, mapiMachine("x1", placed(zoneB, xlarge), ownedBy(ms)))
				c.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(cs, clusterv1.GroupVersion.WithKind("MachineSet"))}
				return []client.Object{ms, cs, c, sm}
			},
			Req: "x1",
			Want: []st.Check{
				st.AuthorityIs("x1", st.ClusterAPI, true),
				st.RequestedIs("x1", st.ClusterAPI),
				st.ControlledBy(&machinev1beta1.Machine{}, mapiNS, "x1", "mapi-set-ms"),
				providerSpecIs("x1", zoneB, xlarge),
				st.Synchronized("x1", 1),
				clusterAPICopy("x1", false, zoneB, xlarge),
			},
		},
	})
}
