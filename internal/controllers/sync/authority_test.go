package sync_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"

	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/testenv"
)

// testGateDecidesWhileSyncHeld: machina's Machine API controllers decide an empty
// status.authoritativeAPI from the spec themselves, as machine-api-operator's do, in the
// namespace the sync mirrors too and with the sync running in the same process: they never
// wait for the sync. The sync's own decision is held (the apiserver refuses, for this
// Machine, any status write carrying status.synchronizedAPI, which only the sync's decision
// writes), and the Machine is still decided and provisioned.
func testGateDecidesWhileSyncHeld(t *testing.T, p platform) {
	e := env.For(t)
	ctx := context.Background()
	name := p.name("gate-decides")
	lift := testenv.Hold{What: "the sync's authority decision for " + name, Group: "machine.openshift.io", Resource: "machines/status",
		Deny: fmt.Sprintf("object.metadata.name == %q && has(object.status) && has(object.status.synchronizedAPI)", name)}.Apply(e)
	defer lift()
	if err := e.Client.Create(ctx, p.mapiMachine(name, "")); err != nil {
		t.Fatal(err)
	}
	e.Eventually(90*time.Second, name+" decided by the Machine API controller and Running", func(ctx context.Context) (bool, string, error) {
		m, err := getMAPI(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		paused := mapicond.Get(m.Status.Conditions, gate.PausedCondition)
		desc := fmt.Sprintf("authority %q synchronizedAPI %q phase %v Paused %+v", m.Status.AuthoritativeAPI, m.Status.SynchronizedAPI, m.Status.Phase, paused)
		return m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityMachineAPI && m.Status.SynchronizedAPI == "" &&
			paused != nil && paused.Status == corev1.ConditionFalse && m.Status.Phase != nil && *m.Status.Phase == machinev1beta1.PhaseRunning, desc, nil
	})
}
