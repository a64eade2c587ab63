package migration_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
