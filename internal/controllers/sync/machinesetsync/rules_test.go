package machinesetsync_test

import (
	"testing"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/controllers/sync/internal/synccommon"
	st "github.com/machina-dev/machina/internal/controllers/sync/internal/synctest"
)

// The creation rows of the migration design's rule table for MachineSets ("MachineSet
// Synchronisation" and the rule summary, seed 000): a Machine API MachineSet maps to a Cluster
// API MachineSet and an InfraMachineTemplate <name>-<hash>, with the Paused/Synchronized
// behaviour and docs/migration.md's refinements. Every row also proves the steady state (the
// settled pass wrote nothing) and, on every write it makes, that no Cluster API MachineSet ever
// names a template that is not there (checkWrite).
func TestMachineSetCreationRules(t *testing.T) {
	syncF := authority.SyncFinalizer
	machineSets.Run(t, []st.Row{
		{
			// Machine API authoritative, no mirror: the template, then the MachineSet naming
			// it, both paused; Synchronized with the generation.
			Name:   "MachineAPI_NoMirror_TemplateThenPausedCopyCreated",
			Before: st.Objs(mapiSet("ms", st.Requested(st.MachineAPI), st.Generation(2))),
			Req:    "ms",
			Want: []st.Check{
				st.AuthorityIs("ms", st.MachineAPI, true),
				clusterAPICopy(mapiSet("ms"), true, true),
				st.Synchronized("ms", 2),
				st.EventSeen("TemplateCreated", "Created SimMachineTemplate "),
				st.EventSeen("MirrorCreated"),
			},
		},
		{
			// An empty authority is decided MachineAPI from the spec, then as above.
			Name:   "EmptyAuthority_DecidedMachineAPI",
			Before: st.Objs(mapiSet("ms")),
			Req:    "ms",
			Want: []st.Check{
				st.AuthorityIs("ms", st.MachineAPI, true),
				clusterAPICopy(mapiSet("ms"), true, true),
				st.Synchronized("ms", 1),
			},
		},
		{
			// Cluster API authoritative from birth, no mirror: the copies are created unpaused
			// and the Cluster API copy is the source from then on.
			Name:   "ClusterAPI_NoMirror_UnpausedCopyCreated",
			Before: st.Objs(mapiSet("ms", st.Requested(st.ClusterAPI))),
			Req:    "ms",
			Want: []st.Check{
				st.AuthorityIs("ms", st.ClusterAPI, true),
				clusterAPICopy(mapiSet("ms"), false, true),
				mapiSpecIs("ms", 1, zoneA, large),
				st.Synchronized("ms", 1),
			},
		},
		{
			// Cluster API authoritative with an existing Cluster API MachineSet: its spec and
			// template are converted onto the Machine API copy; the Cluster API copy is only
			// paired (the sync finalizer), its spec and template as they were.
			Name: "ClusterAPI_WithMirror_ClusterAPISpecConvertedOntoMachineAPI",
			Before: func(t *testing.T) []client.Object {
				c, tmpl := capiCopy(t, mapiSet("ms", placed(zoneC, xlarge), replicas(3)))
				c.Generation = 4
				return []client.Object{mapiSet("ms", st.Requested(st.ClusterAPI)), c, tmpl}
			},
			Req: "ms",
			Want: []st.Check{
				mapiSpecIs("ms", 3, zoneC, xlarge),
				st.Synchronized("ms", 4),
				clusterAPICopy(mapiSet("ms", placed(zoneC, xlarge), replicas(3)), false, false),
			},
		},
		{
			// The Cluster API-authoritative set claims the template the sync wrote for it
			// (unowned, marked machina.dev/mirror-of: MachineSet/<name>) and that it names: a
			// pass that created both stopped before adopting it.
			Name: "ClusterAPI_UnownedTemplateMarkedForIt_Claimed",
			Before: func(t *testing.T) []client.Object {
				c, tmpl := capiCopy(t, mapiSet("ms"))
				return []client.Object{st.WithFinalizers(mapiSet("ms", st.Decided(st.ClusterAPI)), syncF), st.WithFinalizers(c, syncF),
					st.Annotated(st.Unowned(tmpl), authority.MirrorOfAnnotation, "MachineSet/ms")}
			},
			Req: "ms",
			Want: []st.Check{
				clusterAPICopy(mapiSet("ms"), false, true),
				st.Synchronized("ms", 1),
			},
		},
		{
			// ... but never a user's template (no mark) ...
			Name: "ClusterAPI_UnownedUnmarkedTemplate_LeftAlone",
			Before: func(t *testing.T) []client.Object {
				c, tmpl := capiCopy(t, mapiSet("ms"))
				return []client.Object{st.WithFinalizers(mapiSet("ms", st.Decided(st.ClusterAPI)), syncF), st.WithFinalizers(c, syncF), st.Unowned(tmpl)}
			},
			Req: "ms",
			Want: []st.Check{
				st.Unwritten(&infrav1.SimMachineTemplate{}, capiNS, templateName(t, "ms", zoneA, large)),
				st.Synchronized("ms", 1),
			},
		},
		{
			// ... nor one marked for another MachineSet.
			Name: "ClusterAPI_TemplateMarkedForAnotherSet_LeftAlone",
			Before: func(t *testing.T) []client.Object {
				c, tmpl := capiCopy(t, mapiSet("ms"))
				return []client.Object{st.WithFinalizers(mapiSet("ms", st.Decided(st.ClusterAPI)), syncF), st.WithFinalizers(c, syncF),
					st.Annotated(st.Unowned(tmpl), authority.MirrorOfAnnotation, "MachineSet/other")}
			},
			Req: "ms",
			Want: []st.Check{
				st.Unwritten(&infrav1.SimMachineTemplate{}, capiNS, templateName(t, "ms", zoneA, large)),
			},
		},
		{
			// docs/migration.md: a Cluster API-authoritative set naming a template that does not
			// exist is reported (InfraMachineTemplateNotFound) and retried.
			Name: "ClusterAPI_TemplateMissing_Reported",
			Before: func(t *testing.T) []client.Object {
				c, _ := capiCopy(t, mapiSet("ms"))
				return []client.Object{st.WithFinalizers(mapiSet("ms", st.Decided(st.ClusterAPI)), syncF), st.WithFinalizers(c, syncF)}
			},
			Req: "ms",
			Want: []st.Check{
				st.NotSynchronized("ms", authority.TemplateNotFoundReason, 0, templateName(t, "ms", zoneA, large)),
				st.Requeued(),
			},
		},
		{
			// docs/migration.md, pairing: a paused Cluster API MachineSet the Machine API copy
			// names authoritative is unpaused with its template, or it would never scale.
			Name: "ClusterAPI_PausedCopyNeverPaired_UnpausedAtPairing",
			Before: func(t *testing.T) []client.Object {
				c, tmpl := capiCopy(t, mapiSet("ms"))
				return []client.Object{mapiSet("ms", st.Decided(st.ClusterAPI)), st.Paused(c), st.Paused(tmpl)}
			},
			Req: "ms",
			Want: []st.Check{
				clusterAPICopy(mapiSet("ms"), false, false),
				st.EventSeen(synccommon.UnpausedAtPairingReason),
			},
		},
		{
			// Machine API authoritative: drift on the paused mirror (replicas written by someone
			// other than the autoscaler) is overwritten.
			Name: "MachineAPI_ReplicasDriftOnPausedMirror_Overwritten",
			Before: func(t *testing.T) []client.Object {
				c, tmpl := capiCopy(t, mapiSet("ms", replicas(5)))
				return []client.Object{st.WithFinalizers(mapiSet("ms", st.Decided(st.MachineAPI), st.Generation(2), st.SyncedAt(2)), syncF),
					st.WithFinalizers(st.Paused(c), syncF), st.Paused(st.Annotated(tmpl, authority.MirrorOfAnnotation, "MachineSet/ms"))}
			},
			Req: "ms",
			Want: []st.Check{
				clusterAPICopy(mapiSet("ms"), true, true),
				st.Synchronized("ms", 2),
			},
		},
		{
			// A changed providerSpec makes a new template <name>-<new hash>; the mirror names
			// it, and the old one, no longer used, is deleted.
			Name: "MachineAPI_ProviderSpecChanged_NewTemplateOldDeleted",
			Before: func(t *testing.T) []client.Object {
				c, tmpl := capiCopy(t, mapiSet("ms"))
				m := mapiSet("ms", st.Decided(st.MachineAPI), placed(zoneB, xlarge), st.Generation(3), st.SyncedAt(2))
				return []client.Object{st.WithFinalizers(m, syncF), st.WithFinalizers(st.Paused(c), syncF),
					st.Paused(st.Annotated(tmpl, authority.MirrorOfAnnotation, "MachineSet/ms"))}
			},
			Req: "ms",
			Want: []st.Check{
				clusterAPICopy(mapiSet("ms", placed(zoneB, xlarge)), true, true),
				templates("ms", templateName(t, "ms", zoneB, xlarge)),
				st.Absent(&infrav1.SimMachineTemplate{}, capiNS, templateName(t, "ms", zoneA, large)),
				st.Synchronized("ms", 3),
				st.EventSeen("TemplateDeleted"),
			},
		},
		{
			// ... unless an InfraMachine was cloned from it: then it is still used, and kept.
			Name: "MachineAPI_ProviderSpecChanged_TemplateStillClonedFromKept",
			Before: func(t *testing.T) []client.Object {
				c, tmpl := capiCopy(t, mapiSet("ms"))
				m := mapiSet("ms", st.Decided(st.MachineAPI), placed(zoneB, xlarge))
				sm := &infrav1.SimMachine{}
				sm.Name, sm.Namespace = "ms-x1", capiNS
				st.Annotated(sm, clusterv1.TemplateClonedFromNameAnnotation, tmpl.Name)
				return []client.Object{st.WithFinalizers(m, syncF), st.WithFinalizers(st.Paused(c), syncF),
					st.Paused(st.Annotated(tmpl, authority.MirrorOfAnnotation, "MachineSet/ms")), sm}
			},
			Req: "ms",
			Want: []st.Check{
				clusterAPICopy(mapiSet("ms", placed(zoneB, xlarge)), true, true),
				templates("ms", templateName(t, "ms", zoneB, xlarge), templateName(t, "ms", zoneA, large)),
			},
		},
		{
			// A providerSpec the Cluster API cannot carry: Synchronized=False naming the field,
			// and nothing written on the Cluster API side.
			Name:   "Unconvertible_SynchronizedFalseNothingWritten",
			Before: st.Objs(mapiSet("ms", st.Requested(st.MachineAPI), inRegion("sim-west-1"))),
			Req:    "ms",
			Want: []st.Check{
				st.NotSynchronized("ms", authority.ConversionFailedReason, 0, "spec.template.spec.providerSpec.value.region"),
				st.Absent(&clusterv1.MachineSet{}, capiNS, "ms"),
				st.NoWritesIn(capiNS),
			},
		},
		{
			// docs/migration.md: an active Cluster API MachineSet without the sync finalizer is
			// someone else's: left alone, with its template, and the conflict reported.
			Name: "NotMirror_ActiveClusterAPIMachineSet_LeftAloneReported",
			Before: func(t *testing.T) []client.Object {
				c, tmpl := capiCopy(t, mapiSet("ms", placed(zoneC, xlarge)))
				return []client.Object{mapiSet("ms", st.Requested(st.MachineAPI)), c, tmpl}
			},
			Req: "ms",
			Want: []st.Check{
				st.AuthorityIs("ms", st.MachineAPI, false),
				st.NotSynchronized("ms", authority.ClusterAPIMachineSetNotMirrorReason, 0, capiNS+"/ms"),
				st.NoWritesIn(capiNS),
				st.EventSeen(authority.ClusterAPIMachineSetNotMirrorReason),
			},
		},
		{
			// The template is written before the MachineSet: when the MachineSet's create is
			// refused, the template is there and no MachineSet names a missing one; the
			// refusal is reported and returned, so the pass is retried.
			Name:   "TemplateWrittenFirst_MachineSetCreateRefused",
			Before: st.Objs(mapiSet("ms", st.Requested(st.MachineAPI))),
			Req:    "ms",
			Refuse: func(verb string, o client.Object) error {
				if _, ok := o.(*clusterv1.MachineSet); ok && verb == "create" {
					return errRefused
				}
				return nil
			},
			WantErr: errRefused.Error(),
			Want: []st.Check{
				st.Absent(&clusterv1.MachineSet{}, capiNS, "ms"),
				st.ControlledBy(&infrav1.SimMachineTemplate{}, capiNS, templateName(t, "ms", zoneA, large), ""),
				st.NotSynchronized("ms", authority.MirrorWriteFailedReason, 0, errRefused.Error()),
			},
		},
		{
			// The pass after that: the MachineSet is created and adopts the template.
			Name: "TemplateWrittenFirst_MachineSetCreatedLater_TemplateAdopted",
			Before: func(t *testing.T) []client.Object {
				_, tmpl := capiCopy(t, mapiSet("ms"))
				return []client.Object{st.WithFinalizers(mapiSet("ms", st.Decided(st.MachineAPI)), syncF),
					st.Paused(st.Annotated(st.Unowned(tmpl), authority.MirrorOfAnnotation, "MachineSet/ms"))}
			},
			Req: "ms",
			Want: []st.Check{
				clusterAPICopy(mapiSet("ms"), true, true),
				st.Synchronized("ms", 1),
			},
		},
		{
			// While a handover from the Machine API is under way the spec keeps flowing from
			// it; the pause is the migration controller's, so an unpaused copy stays so.
			Name: "Migrating_FromMachineAPI_SpecSyncedPauseLeftAlone",
			Before: func(t *testing.T) []client.Object {
				c, tmpl := capiCopy(t, mapiSet("ms"))
				m := mapiSet("ms", st.Migrating(), replicas(2), st.Generation(2), st.SyncedAt(1))
				return []client.Object{st.WithFinalizers(m, syncF), st.WithFinalizers(c, syncF), st.Annotated(tmpl, authority.MirrorOfAnnotation, "MachineSet/ms")}
			},
			Req: "ms",
			Want: []st.Check{
				clusterAPICopy(mapiSet("ms", replicas(2)), false, true),
				st.Synchronized("ms", 2),
			},
		},
	})
}
