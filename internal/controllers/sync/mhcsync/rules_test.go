package mhcsync_test

import (
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
	st "github.com/machina-dev/machina/internal/controllers/sync/internal/synctest"
)

// The rows of the rule table for MachineHealthChecks (seed 000, "MachineHealthCheck
// Synchronisation", with docs/migration.md's "MachineHealthChecks": authority in annotations,
// the first decision, Cluster API-only features left out with a warning, deletions). Every row
// also proves the steady state: the settled pass wrote nothing.
func TestMachineHealthCheckRules(t *testing.T) {
	syncF := authority.SyncFinalizer
	checks.Run(t, []st.Row{
		{
			// No request, no Cluster API check: the Machine API owns it; a paused mirror is
			// created and the synchronised generation recorded.
			Name:   "NoRequest_NoMirror_MachineAPIPausedMirrorCreated",
			Before: st.Objs(mapiMHC("hc", "40%", st.Generation(3))),
			Req:    "hc",
			Want: []st.Check{
				machineAPICopy("hc", st.MachineAPI, false),
				clusterAPICopy(mapiMHC("hc", "40%"), true),
				synchronized("hc", 3),
			},
		},
		{
			// Requested ClusterAPI with no Cluster API check: the Cluster API one is created
			// active, and the Machine API copy is paused for machine-api-operator's controller.
			Name:   "RequestedClusterAPI_NoMirror_ActiveCopyCreated",
			Before: st.Objs(mapiMHC("hc", "40%", requestedMHC(st.ClusterAPI))),
			Req:    "hc",
			Want: []st.Check{
				machineAPICopy("hc", st.ClusterAPI, true),
				clusterAPICopy(mapiMHC("hc", "40%"), false),
				synchronized("hc", 1),
			},
		},
		{
			// No request beside someone's active Cluster API check of the name: that check is
			// authoritative and the new Machine API copy becomes its mirror, taking its spec.
			Name: "NoRequest_ActiveClusterAPICheck_DecidedClusterAPIAndMirrored",
			Before: func(t *testing.T) []client.Object {
				c := capiMHC(t, mapiMHC("hc", "2"))
				c.Generation = 5
				return []client.Object{mapiMHC("hc", "40%"), c}
			},
			Req: "hc",
			Want: []st.Check{
				machineAPICopy("hc", st.ClusterAPI, true),
				maxUnhealthyIs("hc", "2"),
				synchronized("hc", 5),
				// Paired: the authoritative check takes the sync finalizer, stays active.
				clusterAPICopy(mapiMHC("hc", "2"), false),
			},
		},
		{
			// Deleting the authoritative Cluster API check (which the sync holds by its
			// finalizer) takes the Machine API copy along and lets both go: neither is left
			// Terminating, and the check is not created again from its Machine API copy.
			Name: "ClusterAPI_AuthoritativeCheckDeleted_MachineAPICopyDeleted",
			Before: func(t *testing.T) []client.Object {
				m := mapiMHC("hc", "40%", decidedMHC(st.ClusterAPI, st.ClusterAPI))
				return []client.Object{m, st.Deleting(st.WithFinalizers(capiMHC(t, m), syncF))}
			},
			Req: "hc",
			Want: []st.Check{
				st.Absent(&machinev1beta1.MachineHealthCheck{}, mapiNS, "hc"),
				st.Absent(&clusterv1.MachineHealthCheck{}, capiNS, "hc"),
			},
		},
		{
			// A paused mirror whose authoritative Machine API copy went without the sync (its
			// finalizer removed by hand) would never act again: it is deleted and let go.
			Name: "PausedMirror_MachineAPICopyGone_Deleted",
			Before: func(t *testing.T) []client.Object {
				return []client.Object{st.WithFinalizers(st.Paused(capiMHC(t, mapiMHC("hc", "40%"))), syncF)}
			},
			Req: "hc",
			Want: []st.Check{
				st.Absent(&clusterv1.MachineHealthCheck{}, capiNS, "hc"),
				st.EventSeen("MirrorDeleted", mapiNS+"/hc"),
			},
		},
		{
			// A paused Cluster API check of the name is a mirror left over, not anyone's
			// running check: the new check is the Machine API's and overwrites it.
			Name: "NoRequest_PausedLeftoverCheck_DecidedMachineAPIAndOverwritten",
			Before: func(t *testing.T) []client.Object {
				return []client.Object{mapiMHC("hc", "40%"), st.Paused(capiMHC(t, mapiMHC("hc", "2")))}
			},
			Req: "hc",
			Want: []st.Check{
				machineAPICopy("hc", st.MachineAPI, false),
				clusterAPICopy(mapiMHC("hc", "40%"), true),
			},
		},
		{
			// Drift on a paused mirror is overwritten, and a mirror someone unpaused is paused.
			Name: "MachineAPI_DriftOnMirror_Overwritten",
			Before: func(t *testing.T) []client.Object {
				m := mapiMHC("hc", "40%", decidedMHC(st.MachineAPI, st.MachineAPI), st.Generation(2))
				return []client.Object{m, st.WithFinalizers(capiMHC(t, mapiMHC("hc", "1")), syncF)}
			},
			Req: "hc",
			Want: []st.Check{
				clusterAPICopy(mapiMHC("hc", "40%"), true),
				synchronized("hc", 2),
			},
		},
		{
			// A check the Cluster API cannot express (a remediation template in another
			// namespace) is refused with the field's path; nothing is written on its side.
			Name: "Unconvertible_SynchronizedFalseNothingWritten",
			Before: func(*testing.T) []client.Object {
				m := mapiMHC("hc", "40%")
				m.Spec.RemediationTemplate = &corev1.ObjectReference{Kind: "Metal3RemediationTemplate", Name: "r", Namespace: "elsewhere",
					APIVersion: "infrastructure.cluster.x-k8s.io/v1beta1"}
				return []client.Object{m}
			},
			Req: "hc",
			Want: []st.Check{
				notSynchronized("hc", authority.ConversionFailedReason, "spec.remediationTemplate.namespace"),
				st.Absent(&clusterv1.MachineHealthCheck{}, capiNS, "hc"),
				st.NoWritesIn(capiNS),
			},
		},
		{
			// Seed 000: the optional features of an authoritative Cluster API check are not
			// synced onto the Machine API copy; it mirrors the rest, and a warning names each.
			Name: "ClusterAPI_ClusterAPIOnlyFeature_LeftOutRestMirrored",
			Before: func(t *testing.T) []client.Object {
				c := st.WithFinalizers(capiMHC(t, mapiMHC("hc", "3")), syncF)
				c.Spec.Remediation.TriggerIf.UnhealthyInRange = "[1-4]"
				c.Generation = 2
				return []client.Object{mapiMHC("hc", "40%", decidedMHC(st.ClusterAPI, st.ClusterAPI)), c}
			},
			Req: "hc",
			Want: []st.Check{
				maxUnhealthyIs("hc", "3"),
				synchronized("hc", 2),
				st.EventSeen("ConversionWarning", "unhealthyInRange"),
			},
		},
		{
			// Deleting a check the Machine API owns deletes its Cluster API copy.
			Name: "MachineAPI_Deleted_MirrorDeleted",
			Before: func(t *testing.T) []client.Object {
				m := st.Deleting(mapiMHC("hc", "40%", decidedMHC(st.MachineAPI, st.MachineAPI)))
				return []client.Object{m, st.WithFinalizers(st.Paused(capiMHC(t, m)), syncF)}
			},
			Req: "hc",
			Want: []st.Check{
				st.Absent(&machinev1beta1.MachineHealthCheck{}, mapiNS, "hc"),
				st.Absent(&clusterv1.MachineHealthCheck{}, capiNS, "hc"),
			},
		},
		{
			// ... and so does deleting one mid-handover.
			Name: "Migrating_Deleted_MirrorDeleted",
			Before: func(t *testing.T) []client.Object {
				m := st.Deleting(mapiMHC("hc", "40%", decidedMHC(migrating, st.MachineAPI)))
				return []client.Object{m, st.WithFinalizers(capiMHC(t, m), syncF)}
			},
			Req: "hc",
			Want: []st.Check{
				st.Absent(&machinev1beta1.MachineHealthCheck{}, mapiNS, "hc"),
				st.Absent(&clusterv1.MachineHealthCheck{}, capiNS, "hc"),
			},
		},
		{
			// Deleting the Machine API copy of a check the Cluster API owns only releases the
			// Cluster API check, which keeps checking.
			Name: "ClusterAPI_MachineAPICopyDeleted_ClusterAPICheckKeepsRunning",
			Before: func(t *testing.T) []client.Object {
				m := st.Deleting(mapiMHC("hc", "40%", decidedMHC(st.ClusterAPI, st.ClusterAPI)))
				return []client.Object{m, st.WithFinalizers(capiMHC(t, m), syncF)}
			},
			Req: "hc",
			Want: []st.Check{
				st.Absent(&machinev1beta1.MachineHealthCheck{}, mapiNS, "hc"),
				keptReleased("hc"),
			},
		},
		{
			// A paused mirror deleted while the Machine API owns the check is let go and
			// created again.
			Name: "MachineAPI_PausedMirrorDeleted_Recreated",
			Before: func(t *testing.T) []client.Object {
				m := mapiMHC("hc", "40%", decidedMHC(st.MachineAPI, st.MachineAPI))
				return []client.Object{m, st.Deleting(st.WithFinalizers(st.Paused(capiMHC(t, m)), syncF))}
			},
			Req: "hc",
			Want: []st.Check{
				clusterAPICopy(mapiMHC("hc", "40%"), true),
				st.EventSeen("MirrorRecreated", capiNS+"/hc"),
			},
		},
		{
			// An active Cluster API check without a Machine API copy: the sync takes no action.
			Name: "ClusterAPIOnly_NoAction",
			Before: func(t *testing.T) []client.Object {
				return []client.Object{capiMHC(t, mapiMHC("hc", "40%"))}
			},
			Req: "hc",
			Want: []st.Check{
				st.Absent(&machinev1beta1.MachineHealthCheck{}, mapiNS, "hc"),
				st.NoWritesIn(capiNS),
			},
		},
	})
}
