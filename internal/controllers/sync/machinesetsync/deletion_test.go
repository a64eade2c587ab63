package machinesetsync_test

import (
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
	st "github.com/machina-dev/machina/internal/controllers/sync/internal/synctest"
)

// The deletion rows for MachineSets. What the fake API server cannot do — the garbage
// collector taking a deleted MachineSet's Machines and templates along, a foreground
// deletion, admission refusing one — is left to the lab suites (internal/controllers/sync
// TestSync: NonAuthoritativeMachineSetDeleted_CAPIKeepsRunning,
// ClusterAPIAuthoritativeMachineSetDeleted_MachineAPIMachinesKeepRunning,
// PausedMachineSetMirrorDeleted_RecreatedMachinesKept; config/admission).
func TestMachineSetDeletionRules(t *testing.T) {
	syncF := authority.SyncFinalizer
	machineSets.Run(t, []st.Row{
		{
			// The authoritative Machine API MachineSet takes its paused mirror along, and lets
			// go of the finalizer the paused Cluster API controller would never remove.
			Name: "MachineAPIAuthoritative_Deleted_MirrorDeleted",
			Before: func(t *testing.T) []client.Object {
				c, _ := capiCopy(t, mapiSet("ms"))
				return []client.Object{st.Deleting(st.WithFinalizers(mapiSet("ms", st.Decided(st.MachineAPI)), syncF)),
					st.WithFinalizers(st.Paused(c), syncF, clusterv1.MachineSetFinalizer)}
			},
			Req: "ms",
			Want: []st.Check{
				st.Absent(&machinev1beta1.MachineSet{}, mapiNS, "ms"),
				st.Absent(&clusterv1.MachineSet{}, capiNS, "ms"),
			},
		},
		{
			// Seed 000: the deletion of a non-authoritative Machine API parent is not carried
			// over; the Cluster API MachineSet keeps running, let go by the sync. Its Machines
			// the Machine API still runs are let go of first (docs/migration.md), so the
			// garbage collector leaves them; those the Cluster API runs stay owned and go with
			// it (garbage collection: lab).
			Name: "ClusterAPIAuthoritative_Deleted_ClusterAPISetKeepsRunning_MachineAPIMachinesKept",
			Before: func(t *testing.T) []client.Object {
				ms := mapiSet("ms", st.Decided(st.ClusterAPI))
				c, _ := capiCopy(t, mapiSet("ms"))
				return []client.Object{st.Deleting(st.WithFinalizers(ms, syncF)), st.WithFinalizers(c, syncF, clusterv1.MachineSetFinalizer),
					machineOf(ms, "ms-mapi", machinev1beta1.MachineAuthorityMachineAPI),
					machineOf(ms, "ms-capi", machinev1beta1.MachineAuthorityClusterAPI)}
			},
			Req: "ms",
			Want: []st.Check{
				st.Absent(&machinev1beta1.MachineSet{}, mapiNS, "ms"),
				st.Kept(&clusterv1.MachineSet{}, capiNS, "ms", []string{clusterv1.MachineSetFinalizer}, []string{syncF}),
				st.NotOwnedBy(&machinev1beta1.Machine{}, mapiNS, "ms-mapi", "mapi-set-ms"),
				st.ControlledBy(&machinev1beta1.Machine{}, mapiNS, "ms-capi", "mapi-set-ms"),
				st.EventSeen("MachinesKept"),
			},
		},
		{
			// A paused mirror deleted while the Machine API is authoritative is not carried
			// over: its Machines and templates are let go of (so the collector takes none of
			// them), it is released and created again, and it adopts its template back.
			Name: "MachineAPIAuthoritative_PausedMirrorDeleted_RecreatedDependentsKept",
			Before: func(t *testing.T) []client.Object {
				c, tmpl := capiCopy(t, mapiSet("ms"))
				m := &clusterv1.Machine{}
				m.Name, m.Namespace, m.UID = "ms-x1", capiNS, "capi-machine-ms-x1"
				m.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(c, clusterv1.GroupVersion.WithKind("MachineSet"))}
				return []client.Object{st.WithFinalizers(mapiSet("ms", st.Decided(st.MachineAPI)), syncF),
					st.Deleting(st.WithFinalizers(st.Paused(c), syncF, clusterv1.MachineSetFinalizer)),
					st.Paused(st.Annotated(tmpl, authority.MirrorOfAnnotation, "MachineSet/ms")), m}
			},
			Req: "ms",
			Want: []st.Check{
				clusterAPICopy(mapiSet("ms"), true, true),
				st.NotOwnedBy(&clusterv1.Machine{}, capiNS, "ms-x1", "capi-set-ms"),
				st.EventSeen("MirrorRecreated"),
				st.Synchronized("ms", 1),
			},
		},
		{
			// Deleting the authoritative Cluster API MachineSet deletes its Machine API copy.
			Name: "ClusterAPIAuthoritative_ClusterAPISetDeleted_MachineAPICopyDeleted",
			Before: func(t *testing.T) []client.Object {
				c, tmpl := capiCopy(t, mapiSet("ms"))
				return []client.Object{st.WithFinalizers(mapiSet("ms", st.Decided(st.ClusterAPI)), syncF), st.Deleting(st.WithFinalizers(c, syncF)), tmpl}
			},
			Req: "ms",
			Want: []st.Check{
				st.Absent(&machinev1beta1.MachineSet{}, mapiNS, "ms"),
				st.Absent(&clusterv1.MachineSet{}, capiNS, "ms"),
			},
		},
		{
			// An authoritative Cluster API MachineSet whose Machine API copy is gone carries
			// on alone, released by the sync.
			Name: "MachineAPICopyGone_ClusterAPISetReleasedKeepsRunning",
			Before: func(t *testing.T) []client.Object {
				c, tmpl := capiCopy(t, mapiSet("ms"))
				return []client.Object{st.WithFinalizers(c, syncF), tmpl}
			},
			Req: "ms",
			Want: []st.Check{
				st.Kept(&clusterv1.MachineSet{}, capiNS, "ms", nil, []string{syncF}),
				st.Absent(&machinev1beta1.MachineSet{}, mapiNS, "ms"),
			},
		},
		{
			// A paused mirror whose authoritative Machine API copy went without the sync (its
			// finalizer removed by hand) would never act again: it is deleted and let go, the
			// core's finalizer with the sync's.
			Name: "MachineAPICopyGone_PausedMirrorDeleted",
			Before: func(t *testing.T) []client.Object {
				c, tmpl := capiCopy(t, mapiSet("ms"))
				return []client.Object{st.WithFinalizers(st.Paused(c), syncF, clusterv1.MachineSetFinalizer), tmpl}
			},
			Req: "ms",
			Want: []st.Check{
				st.Absent(&clusterv1.MachineSet{}, capiNS, "ms"),
				st.EventSeen("MirrorDeleted"),
			},
		},
		{
			// Deleting the Machine API copy never takes someone else's active Cluster API
			// MachineSet of its name along.
			Name: "MachineAPICopyDeletedBesideNotMirror_ClusterAPISetUntouched",
			Before: func(t *testing.T) []client.Object {
				c, tmpl := capiCopy(t, mapiSet("ms", placed(zoneC, xlarge)))
				return []client.Object{st.Deleting(st.WithFinalizers(mapiSet("ms", st.Decided(st.MachineAPI)), syncF)), c, tmpl}
			},
			Req: "ms",
			Want: []st.Check{
				st.Absent(&machinev1beta1.MachineSet{}, mapiNS, "ms"),
				st.NoWritesIn(capiNS),
			},
		},
		{
			// A handover under way settles its own deletions (the migration controller).
			Name: "Migrating_ClusterAPISetDeleted_LeftToMigration",
			Before: func(t *testing.T) []client.Object {
				c, tmpl := capiCopy(t, mapiSet("ms"))
				return []client.Object{st.WithFinalizers(mapiSet("ms", st.Migrating()), syncF), st.Deleting(st.WithFinalizers(c, syncF)), tmpl}
			},
			Req: "ms",
			Want: []st.Check{
				st.NoWritesIn(capiNS),
				st.NoWritesIn(mapiNS),
			},
		},
	})
}

// machineOf is a Machine API Machine of the set ms whose authority is a.
func machineOf(ms *machinev1beta1.MachineSet, name string, a machinev1beta1.MachineAuthority) *machinev1beta1.Machine {
	m := &machinev1beta1.Machine{}
	m.Name, m.Namespace, m.UID, m.Labels = name, mapiNS, types.UID("mapi-machine-"+name), st.SetLabels(ms.Name)
	m.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(ms, machinev1beta1.GroupVersion.WithKind("MachineSet"))}
	m.Spec.AuthoritativeAPI, m.Status.AuthoritativeAPI = a, a
	return m
}
