package migration_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/patch"
	"github.com/machina-dev/machina/internal/testenv"
)

// testLeftoverPausedPair: a Cluster API Machine left paused by a former install, its
// InfraMachine recording a running instance (its Machine API copy deleted while machina was
// away without the instance being terminated, the sync's finalizer gone as an uninstall takes
// it off), meets a new Machine API Machine of its name that names the Cluster API
// authoritative. The sync unpauses the Cluster API copies as it pairs them, and the platform's
// provider takes up the instance the InfraMachine records: the Machine runs on it under the
// Cluster API, nothing launched or terminated. Before the sync unpaused at pairing, the
// Cluster API Machine stayed paused for ever and nothing ran the Machine.
//
// Not in the upstream lab: machine-api-operator's Machine controller puts its finalizer back
// as soon as it is taken off and then terminates the instance of the deleted Machine, as it
// should, so the leftover cannot be staged there. CAPA taking the instance up is shown in the
// aws lab.
func testLeftoverPausedPair(t *testing.T, e *testenv.Env, pc platformCase) {
	ctx := context.Background()
	name := pc.name("leftover")
	if err := e.Client.Create(ctx, pc.machine(name, 1)); err != nil {
		t.Fatal(err)
	}
	providerID := waitRunningUnder(t, e, name, machinev1beta1.MachineAuthorityMachineAPI, "")
	e.Eventually(60*time.Second, "the InfraMachine mirror names the instance", func(ctx context.Context) (bool, string, error) {
		_, _, in, err := getAll(ctx, e, pc.provider, name)
		if err != nil {
			return false, err.Error(), nil
		}
		return in.providerID == providerID && in.paused, in.String(), nil
	})

	e.StopManager()
	leaveOver(t, e, name)
	before, err := e.Cloud.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.StartManager()
	// Created once the manager is back: in the upstream lab its admission webhook must answer.
	e.Eventually(30*time.Second, "the new Machine API Machine created", func(ctx context.Context) (bool, string, error) {
		m := pc.machine(name, 1)
		m.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
		err := e.Client.Create(ctx, m)
		return err == nil || apierrors.IsAlreadyExists(err), fmt.Sprint(err), nil
	})

	waitRunningUnder(t, e, name, machinev1beta1.MachineAuthorityClusterAPI, providerID)
	for _, p := range append(instancesChanged(e, before), instanceRunning(ctx, e, providerID)...) {
		t.Error(p)
	}
}

// leaveOver makes the pair name what a former install leaves behind: the Machine API Machine
// deleted with its finalizers taken off first (nothing terminates its instance), the sync's
// finalizer taken off the Cluster API Machine, which stays paused.
func leaveOver(t *testing.T, e *testenv.Env, name string) {
	t.Helper()
	ctx := context.Background()
	m, c, err := getBoth(ctx, e, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := patch.RemoveFinalizer(ctx, e.Client, c, authority.SyncFinalizer); err != nil {
		t.Fatal(err)
	}
	if _, err := patch.RemoveFinalizer(ctx, e.Client, m, slices.Clone(m.Finalizers)...); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	e.Eventually(30*time.Second, "the Machine API Machine gone", func(ctx context.Context) (bool, string, error) {
		err := e.Client.Get(ctx, client.ObjectKeyFromObject(m), &machinev1beta1.Machine{})
		return apierrors.IsNotFound(err), fmt.Sprint(err), nil
	})
}
