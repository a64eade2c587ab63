package migration_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/controllers/migration"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/testenv"
)

// testInfraDeletedMidHandover: an InfraMachine deleted while a handover to the Cluster API is
// held just before its unpause (it stays, terminating, under a provider finalizer an earlier
// Cluster API tenure left on it) cannot be unpaused. The Migration condition says so, with the
// error, instead of still naming the pause an earlier step waited for; setting the spec back
// returns the Machine to the Machine API, which then deletes it cleanly.
func testInfraDeletedMidHandover(t *testing.T, e *testenv.Env, pc platformCase) {
	ctx := context.Background()
	name := pc.name("infra-gone")
	if err := e.Client.Create(ctx, pc.machine(name, 0)); err != nil {
		t.Fatal(err)
	}
	waitRunningUnder(t, e, name, machinev1beta1.MachineAuthorityMachineAPI, "")
	_, _, in, err := getAll(ctx, e, pc.provider, name)
	if err != nil {
		t.Fatal(err)
	}
	lift := infraCrashSteps(e, pc.provider, name, in.obj.GetName(), machinev1beta1.MachineAuthorityClusterAPI)[1].hold.apply(e)
	request(t, e, name, machinev1beta1.MachineAuthorityClusterAPI)
	var infra *unstructured.Unstructured
	e.Eventually(120*time.Second, "step 2, the InfraMachine still paused", func(ctx context.Context) (bool, string, error) {
		m, c, in, err := getAll(ctx, e, pc.provider, name)
		if err != nil {
			return false, err.Error(), nil
		}
		infra = in.obj
		return stepToClusterAPI(m, c) >= 2 && in.paused, describeMachine(m, c) + "; " + in.String(), nil
	})
	base := infra.DeepCopy()
	controllerutil.AddFinalizer(infra, pc.provider.InfraMachineFinalizers[0])
	if err := e.Client.Patch(ctx, infra, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Delete(ctx, infra); err != nil {
		t.Fatal(err)
	}
	lift()
	e.Eventually(60*time.Second, "the failing step reported", func(ctx context.Context) (bool, string, error) {
		m := &machinev1beta1.Machine{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: "openshift-machine-api", Name: name}, m); err != nil {
			return false, err.Error(), nil
		}
		c := mapicond.Get(m.Status.Conditions, migration.MigrationCondition)
		return c != nil && c.Reason == migration.HandoverStepFailedReason && strings.Contains(c.Message, "being deleted"),
			cond(m, migration.MigrationCondition), nil
	})
	request(t, e, name, machinev1beta1.MachineAuthorityMachineAPI)
	waitRunningUnder(t, e, name, machinev1beta1.MachineAuthorityMachineAPI, "")
	m := &machinev1beta1.Machine{}
	m.Namespace, m.Name = "openshift-machine-api", name
	if err := e.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	e.Eventually(120*time.Second, "both copies gone", func(ctx context.Context) (bool, string, error) {
		errM := e.Client.Get(ctx, client.ObjectKeyFromObject(m), &machinev1beta1.Machine{})
		errC := e.Client.Get(ctx, client.ObjectKey{Namespace: "openshift-cluster-api", Name: name}, &clusterv1.Machine{})
		return apierrors.IsNotFound(errM) && apierrors.IsNotFound(errC), fmt.Sprintf("mapi %v capi %v", errM, errC), nil
	})
}
