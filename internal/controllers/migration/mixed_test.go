package migration_test

import (
	"context"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/migration"
	"github.com/machina-dev/machina/internal/testenv"
)

// One MachineHealthCheck watches two MachineSets, one owned by each API. Whichever API the
// check belongs to, an unhealthy Machine of either set is replaced by that set's own API:
//
//   - a Machine API check deletes the Machine API copy; for the Cluster API-owned Machine the
//     deletion reaches its Cluster API copy and the Cluster API MachineSet replaces it;
//   - a Cluster API check marks the Cluster API copy OwnerRemediated=False; for the Machine
//     API-owned Machine, whose Cluster API copy is a paused mirror the Cluster API check
//     controller leaves out, the sync's health check of mirrors marks it, the sync carries
//     that over and deletes the authoritative Machine API copy, and the Machine API
//     MachineSet replaces it.
//
// Then the Machine API-owned set's Machine is handed to the Cluster API alone: the Cluster
// API check marks a Cluster API-authoritative Machine whose owning Cluster API MachineSet is
// a paused mirror, which never replaces it, so the sync deletes the Machine for it and the
// Machine API MachineSet replaces it.
//
// Only the check with authority acts (breakAndWaitRemediatedBy counts both checks' events).
func TestMixedClusterHealthCheck(t *testing.T) {
	t.Parallel() // a lab of its own, beside the package's other labs (see TestOwnLab)
	e := testenv.Start(t, testenv.Options{Groups: "machineapi,sync,migration,clusterapi,sim"})
	e.SeedCluster("lab")
	mixedRemediation(t, e, "mixed", func(name string) *machinev1beta1.MachineSet { return machineSet(name, 1) }, true)
	t.Run("MachineSetMovedAlone_NoWriteLoop", func(t *testing.T) { testMachineSetMovedAloneNoWriteLoop(t, e.For(t)) })
	t.Run("FailedMachineAPIMachine_ClusterAPICheckRemediatesAtOnce", func(t *testing.T) { testFailedMachineRemediatedAtOnce(t, e.For(t)) })
}

// testMixedRemediationOn runs the mixed cluster in the upstream lab, beside machine-api-operator's
// and the upstream core's checks, for the rows where the check and the Machine belong to
// different APIs (MachineHealthCheckHandover covers the others there).
func testMixedRemediationOn(t *testing.T, e *testenv.Env, pc platformCase) {
	mixedRemediation(t, e, pc.name("mixed"), func(name string) *machinev1beta1.MachineSet { return platformSet(pc, name, 1, pc.small) }, false)
}

// mixedRemediation creates the sets check-m (Machine API) and check-c (Cluster API) and the
// check over both, then remediates under each owner of the check: every row of the table in
// docs/migration.md, or with sameAPI false only those where check and Machine differ.
func mixedRemediation(t *testing.T, e *testenv.Env, check string, newSet func(string) *machinev1beta1.MachineSet, sameAPI bool) {
	ctx := context.Background()
	const roleLabel = "machine.openshift.io/cluster-api-machine-role"
	role := check + "-worker"
	mapiSet, capiSet := check+"-m", check+"-c"
	sets := map[string]machinev1beta1.MachineAuthority{
		mapiSet: machinev1beta1.MachineAuthorityMachineAPI,
		capiSet: machinev1beta1.MachineAuthorityClusterAPI,
	}
	for name := range sets {
		ms := newSet(name)
		ms.Spec.Template.Labels[roleLabel] = role
		if err := e.Client.Create(ctx, ms); err != nil {
			t.Fatal(err)
		}
	}
	for name, owner := range sets {
		waitSet(t, e, name, 1)
		if owner == machinev1beta1.MachineAuthorityClusterAPI {
			moveSet(t, e, name, owner)
		}
	}
	if err := e.Client.Create(ctx, healthCheck(check, map[string]string{roleLabel: role})); err != nil {
		t.Fatal(err)
	}
	waitCheckSettled(t, e, check, machinev1beta1.MachineAuthorityMachineAPI, "")

	remediate := func(t *testing.T, by machinev1beta1.MachineAuthority, names ...string) {
		for _, name := range names {
			breakAndWaitRemediatedBy(t, e.For(t), name, check, by)
			waitSet(t, e.For(t), name, 1)
			assertOwner(t, e.For(t), name, sets[name])
		}
	}
	byMAPI, byCAPI := []string{capiSet}, []string{mapiSet}
	if sameAPI {
		byMAPI, byCAPI = []string{mapiSet, capiSet}, []string{mapiSet, capiSet}
	}
	t.Run("MachineAPICheck", func(t *testing.T) { remediate(t, machinev1beta1.MachineAuthorityMachineAPI, byMAPI...) })

	requestCheck(t, e, check, machinev1beta1.MachineAuthorityClusterAPI)
	waitCheckSettled(t, e, check, machinev1beta1.MachineAuthorityClusterAPI, migration.CompletedReason)
	t.Run("ClusterAPICheck", func(t *testing.T) { remediate(t, machinev1beta1.MachineAuthorityClusterAPI, byCAPI...) })
	t.Run("ClusterAPICheck_MachineMovedAlone", func(t *testing.T) {
		moveMachines(t, e.For(t), mapiSet, machinev1beta1.MachineAuthorityClusterAPI)
		remediate(t, machinev1beta1.MachineAuthorityClusterAPI, mapiSet)
	})
}

// assertOwner checks that the set's Machines still belong to the API that owns the set:
// remediation replaced them without moving anything between the APIs.
func assertOwner(t *testing.T, e *testenv.Env, set string, owner machinev1beta1.MachineAuthority) {
	t.Helper()
	ms, _, err := getSets(context.Background(), e, set)
	if err != nil {
		t.Fatal(err)
	}
	if ms.Status.AuthoritativeAPI != owner {
		t.Fatalf("MachineSet %s is %s-authoritative after remediation, want %s", set, ms.Status.AuthoritativeAPI, owner)
	}
	var list machinev1beta1.MachineList
	if err := e.Client.List(context.Background(), &list, client.InNamespace(mapiNS),
		client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": set}); err != nil {
		t.Fatal(err)
	}
	for _, m := range list.Items {
		if m.DeletionTimestamp.IsZero() && m.Status.AuthoritativeAPI != owner {
			t.Errorf("replacement Machine %s of %s is %q-authoritative, want %s", m.Name, set, m.Status.AuthoritativeAPI, owner)
		}
	}
}
