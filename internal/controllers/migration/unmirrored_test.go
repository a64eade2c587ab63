package migration_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/migration"
	"github.com/machina-dev/machina/internal/mapicond"
)

// testSetWaitsForUnmirrored: a MachineSet changes hands only when every Machine it controls
// has a copy in both APIs. A Machine the set controls but whose providerSpec the conversion
// refuses (so it has no Cluster API copy) holds the MachineSet's migration, named in its
// condition; once that Machine is gone the migration completes. The set's Machines are found
// through the manager's controller index, not by walking the namespace.
func testSetWaitsForUnmirrored(t *testing.T, pc platformCase) {
	e := env.For(t)
	ctx := context.Background()
	name := pc.name("held")
	if err := e.Client.Create(ctx, platformSet(pc, name, 0, pc.small)); err != nil {
		t.Fatal(err)
	}
	waitTemplate(t, e, pc, name, "")
	ms := &machinev1beta1.MachineSet{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: "openshift-machine-api", Name: name}, ms); err != nil {
		t.Fatal(err)
	}
	// Controlled by the set but outside its selector: the MachineSet neither counts nor
	// deletes it, and the sync cannot convert it.
	stray := pc.machine(name+"-stray", 0)
	stray.Spec.ProviderSpec.Value = pc.unconvertible
	stray.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(ms, machinev1beta1.GroupVersion.WithKind("MachineSet"))}
	if err := e.Client.Create(ctx, stray); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "the stray Machine decided and not synchronised", func(ctx context.Context) (bool, string, error) {
		m := &machinev1beta1.Machine{}
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(stray), m); err != nil {
			return false, err.Error(), nil
		}
		c := mapicond.Get(m.Status.Conditions, "Synchronized")
		return m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityMachineAPI && c != nil && c.Status == "False", cond(m, "Synchronized"), nil
	})
	base := ms.DeepCopy()
	ms.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
	if err := e.Client.Patch(ctx, ms, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	want := "1 Machine(s) not mirrored in both APIs yet: machine.openshift.io/" + stray.Name
	e.Eventually(60*time.Second, "the MachineSet's migration held by "+stray.Name, func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(ms), ms); err != nil {
			return false, err.Error(), nil
		}
		c := mapicond.Get(ms.Status.Conditions, migration.MigrationCondition)
		got := fmt.Sprintf("status.authoritativeAPI %s, %+v", ms.Status.AuthoritativeAPI, c)
		return c != nil && strings.Contains(c.Message, want) && ms.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityMachineAPI, got, nil
	})
	if err := e.Client.Delete(ctx, stray); err != nil {
		t.Fatal(err)
	}
	e.Eventually(120*time.Second, "the stray Machine gone and the MachineSet migrated", func(ctx context.Context) (bool, string, error) {
		err := e.Client.Get(ctx, client.ObjectKeyFromObject(stray), &machinev1beta1.Machine{})
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(ms), ms); err != nil {
			return false, err.Error(), nil
		}
		return apierrors.IsNotFound(err) && ms.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityClusterAPI,
			fmt.Sprintf("stray: %v; MachineSet status.authoritativeAPI %s", err, ms.Status.AuthoritativeAPI), nil
	})
	if err := e.Client.Delete(ctx, ms); err != nil {
		t.Fatal(err)
	}
}

// testOrphanAdopted: a Cluster API-authoritative Machine whose Cluster API copy has no
// controller, while its Machine API copy is controlled by a MachineSet that is still the Machine
// API's, gets the mirror of that MachineSet as its controller from the sync, and the
// MachineSet can then change hands. The state arises when a Machine is handed to the Cluster
// API before its MachineSet's mirror exists (its copy was made without a controller, and the
// paused mirror adopts nothing): seen in CI as a MachineSet migration that waited for ever.
// Here the controller reference is taken off by hand, as a user may.
func testOrphanAdopted(t *testing.T, pc platformCase) {
	e := env.For(t)
	ctx := context.Background()
	name := pc.name("orphan")
	if err := e.Client.Create(ctx, platformSet(pc, name, 1, pc.small)); err != nil {
		t.Fatal(err)
	}
	e.Eventually(120*time.Second, "1 Machine running in both APIs", func(ctx context.Context) (bool, string, error) {
		m, c, r, desc := machinesOf(ctx, e, name)
		return m == 1 && c == 1 && r == 1, desc, nil
	})
	moveMachines(t, e, name, machinev1beta1.MachineAuthorityClusterAPI)
	var list clusterv1.MachineList
	if err := e.Client.List(ctx, &list, client.InNamespace(capiNS), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": name}); err != nil || len(list.Items) != 1 {
		t.Fatalf("want the set's one Cluster API Machine, have %d (%v)", len(list.Items), err)
	}
	m := &list.Items[0]
	set := metav1.GetControllerOf(m)
	if set == nil || set.Kind != "MachineSet" || set.Name != name {
		t.Fatalf("Cluster API Machine %s is controlled by %v, want MachineSet %s", m.Name, set, name)
	}
	base := m.DeepCopy()
	m.OwnerReferences = slices.DeleteFunc(m.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == set.UID })
	if err := e.Client.Patch(ctx, m, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "the Cluster API copy controlled by its MachineSet's mirror again", func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			return false, err.Error(), nil
		}
		ref := metav1.GetControllerOf(m)
		return ref != nil && ref.UID == set.UID, fmt.Sprintf("owners %+v", m.OwnerReferences), nil
	})
	migrateSet(t, e, name, machinev1beta1.MachineAuthorityClusterAPI)
	if err := e.Client.Delete(ctx, &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: mapiNS, Name: name}}); err != nil {
		t.Fatal(err)
	}
}
