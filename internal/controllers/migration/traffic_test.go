package migration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/testenv"
)

// testScaledWhileMigrating: a MachineSet scaled on its old side after the handover started
// (status Migrating, the old controllers already paused) is still synchronised, so the
// handover completes and the new side runs the new count (on aws its new Machine is launched
// by the upstream CAPA controller). It runs in each platform's own lab (TestOwnLab).
func testScaledWhileMigrating(t *testing.T, e *testenv.Env, pc platformCase) {
	ctx := context.Background()
	name := pc.name("latecomer")
	if err := e.Client.Create(ctx, platformSet(pc, name, 1, pc.small)); err != nil {
		t.Fatal(err)
	}
	waitSet(t, e, name, 1)
	waitSetSynchronized(t, e, name)
	// Hold the handover right after it starts: the Machine API copy may not report Paused.
	lift := hold{"the Machine API copy's Paused=True", "machine.openshift.io", "machinesets/status",
		celNamed(name) + " && " + celHasCondition("object", "Paused", "True") + " && !" + celHasCondition("oldObject", "Paused", "True")}.apply(e)
	requestSet(t, e, name, machinev1beta1.MachineAuthorityClusterAPI)
	e.Eventually(60*time.Second, name+" Migrating", func(ctx context.Context) (bool, string, error) {
		m, c, err := getSets(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		return m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityMigrating, describeSets(m, c), nil
	})
	scaleSet(t, e, name, 2) // as `kubectl scale` on the Machine API MachineSet would
	lift()
	e.Eventually(120*time.Second, name+" handed over with the new replica count", func(ctx context.Context) (bool, string, error) {
		m, c, err := getSets(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		return m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityClusterAPI && ptr.Deref(c.Spec.Replicas, 0) == 2 && !gate.HasPausedAnnotation(c),
			describeSets(m, c) + fmt.Sprintf(" capi replicas %d", ptr.Deref(c.Spec.Replicas, 0)), nil
	})
	waitSet(t, e, name, 2)
}

func waitSetSynchronized(t *testing.T, e *testenv.Env, name string) {
	t.Helper()
	e.Eventually(60*time.Second, name+" synchronised", func(ctx context.Context) (bool, string, error) {
		m, c, err := getSets(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		return m.Status.SynchronizedGeneration == m.Generation && condStatus(m.Status.Conditions, "Synchronized") == "True", describeSets(m, c), nil
	})
}

// scaleSet sets a Machine API MachineSet's replicas through its scale subresource.
func scaleSet(t *testing.T, e *testenv.Env, name string, n int32) {
	t.Helper()
	ms := &machinev1beta1.MachineSet{}
	if err := e.Client.Get(context.Background(), client.ObjectKey{Namespace: "openshift-machine-api", Name: name}, ms); err != nil {
		t.Fatal(err)
	}
	patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n))
	if err := e.Client.SubResource("scale").Patch(context.Background(), ms, patch); err != nil {
		t.Fatal(err)
	}
}
