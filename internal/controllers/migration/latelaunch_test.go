package migration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/testenv"
)

// launchLatency keeps every RunInstances call in flight long enough for a migration request
// to be made, accepted and started while the launch is still running.
const launchLatency = 8 * time.Second

// testLaunchInFlight requests a handover while the old side's controller is launching the
// Machine's instance (the cloud answers RunInstances late). The old side's controller must
// record that instance before it acknowledges the pause, and the migration must wait for
// the acknowledgement of the controller that launches (the InfraMachine's, going from the
// Cluster API), so the new side adopts the instance instead of launching a second one.
// It runs in each platform's own lab (TestOwnLab): on aws the Cluster API side's launch is
// the upstream CAPA controller's, held in flight by the EC2 front.
func testLaunchInFlight(t *testing.T, e *testenv.Env, pc platformCase) {
	for _, to := range []machinev1beta1.MachineAuthority{machinev1beta1.MachineAuthorityClusterAPI, machinev1beta1.MachineAuthorityMachineAPI} {
		t.Run("To"+string(to), func(t *testing.T) { launchInFlight(t, e.For(t), pc, to) })
	}
}

func launchInFlight(t *testing.T, e *testenv.Env, pc platformCase, to machinev1beta1.MachineAuthority) {
	ctx := context.Background()
	name := pc.name("inflight-capi")
	if to == machinev1beta1.MachineAuthorityMachineAPI {
		name = pc.name("inflight-mapi")
	}
	from := machinev1beta1.MachineAuthorityMachineAPI
	if to == from {
		from = machinev1beta1.MachineAuthorityClusterAPI
	}
	f, err := e.Cloud.CreateFault(ctx, api.Fault{Kind: api.FaultLatency, Operation: api.OpRunInstances, LatencyMillis: int(launchLatency.Milliseconds())})
	if err != nil {
		t.Fatal(err)
	}
	lifted := false
	lift := func() {
		if !lifted {
			lifted = true
			if _, err := e.Cloud.DeleteFaults(context.Background(), f.FaultID); err != nil {
				t.Error(err)
			}
		}
	}
	defer lift()
	created := instancesCreated(t, e)
	m := pc.machine(name, 0)
	m.Spec.AuthoritativeAPI = from
	start := time.Now()
	if err := e.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	// The launching side has stored its finalizer (it does so right before launching) and
	// the copies are synchronised: the migration may start.
	e.Eventually(60*time.Second, "launching and synchronised", func(ctx context.Context) (bool, string, error) {
		m, c, err := getBoth(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		var launching bool
		if from == machinev1beta1.MachineAuthorityMachineAPI {
			launching = controllerutil.ContainsFinalizer(m, machinev1beta1.MachineFinalizer)
		} else {
			in, err := getInfra(ctx, e, pc.provider, c)
			if err != nil {
				return false, err.Error(), nil
			}
			launching = in.providerFinalizer
		}
		ok := launching && m.Status.AuthoritativeAPI == from && m.Spec.ProviderID == nil &&
			m.Status.SynchronizedGeneration == m.Generation && mapicond.IsTrue(m.Status.Conditions, "Synchronized")
		return ok, describeMachine(m, c), nil
	})
	request(t, e, name, to)
	if time.Since(start) > launchLatency {
		t.Logf("the request came %s after the Machine was created: the launch may have answered already", time.Since(start))
	}
	e.Eventually(120*time.Second, "handed over, both copies naming one instance", func(ctx context.Context) (bool, string, error) {
		m, c, err := getBoth(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		ok := m.Status.AuthoritativeAPI == to && m.Spec.ProviderID != nil && c.Spec.ProviderID == *m.Spec.ProviderID &&
			m.Status.Phase != nil && *m.Status.Phase == "Running" && c.Status.Phase == "Running"
		return ok, describeMachine(m, c), nil
	})
	lift()
	// A few resyncs of both families: nothing launches afterwards either.
	time.Sleep(3 * time.Second)
	if n := instancesCreated(t, e); n != created+1 {
		list, _ := e.Cloud.DescribeInstances(ctx, api.DescribeInstancesRequest{})
		var mine []string
		for _, i := range list {
			if i.LaunchTime.After(start.Add(-time.Second)) {
				mine = append(mine, fmt.Sprintf("%s %s %v", i.InstanceID, i.State, i.Tags))
			}
		}
		t.Fatalf("one Machine, %d instances launched: %v", n-created, mine)
	}
	if err := e.Client.Delete(ctx, &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "openshift-machine-api", Name: name}}); err != nil {
		t.Fatal(err)
	}
}
