package migration_test

import (
	"context"
	"fmt"
	"path"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/testenv"
)

// testDeleteWhileMigrating deletes a Machine while its handover is held at a step, in both
// directions: the deletion completes — the Machine API copy goes, nothing stays Terminating —
// and the instance is either terminated (the Cluster API copy went too) or kept by a Cluster
// API copy that carries on alone, unpaused; no instance is launched. The CAPI cases delete the
// Cluster API copy instead once it is unpaused (step 3, the Machine API finalizer still on, and
// step 4, after the Machine API let go of the instance): the Cluster API side is then the
// active one, the handover ends there, both copies go and the instance is terminated (the
// soak once leaked an instance there). Before step 3 such a deletion is the sync's: a mirror
// deleted by hand is recreated (TestSync). It runs in each platform's own lab (TestOwnLab).
func testDeleteWhileMigrating(t *testing.T, e *testenv.Env, pc platformCase) {
	for _, tc := range []struct {
		to   machinev1beta1.MachineAuthority
		step int
		capi bool
	}{
		{machinev1beta1.MachineAuthorityClusterAPI, 1, false}, {machinev1beta1.MachineAuthorityClusterAPI, 2, false},
		{machinev1beta1.MachineAuthorityClusterAPI, 3, false}, {machinev1beta1.MachineAuthorityClusterAPI, 4, false},
		{machinev1beta1.MachineAuthorityMachineAPI, 1, false}, {machinev1beta1.MachineAuthorityMachineAPI, 3, false},
		{machinev1beta1.MachineAuthorityClusterAPI, 3, true}, {machinev1beta1.MachineAuthorityClusterAPI, 4, true},
	} {
		side := ""
		if tc.capi {
			side = "capi"
		}
		t.Run(fmt.Sprintf("%sTo%sStep%d", strings.ToUpper(side), tc.to, tc.step), func(t *testing.T) {
			// A name per case: the Machines of cases run one after another must not share a
			// name (the sync's refusal of a leftover InfraMachine has its own test in sync).
			to := strings.ToLower(string(tc.to))[:1]
			deleteAt(t, e.For(t), pc, pc.name(fmt.Sprintf("del-%s%s-%d", side, to, tc.step)), tc.to, tc.step, tc.capi)
		})
	}
}

func deleteAt(t *testing.T, e *testenv.Env, pc platformCase, name string, to machinev1beta1.MachineAuthority, k int, capiSide bool) {
	ctx := context.Background()
	if err := e.Client.Create(ctx, pc.machine(name, 0)); err != nil {
		t.Fatal(err)
	}
	providerID := waitRunningUnder(t, e, name, machinev1beta1.MachineAuthorityMachineAPI, "")
	step := stepToClusterAPI
	if to == machinev1beta1.MachineAuthorityMachineAPI {
		request(t, e, name, machinev1beta1.MachineAuthorityClusterAPI)
		waitRunningUnder(t, e, name, machinev1beta1.MachineAuthorityClusterAPI, providerID)
		step = stepToMachineAPI
	}
	before, err := e.Cloud.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st := crashSteps(name, to)[k-1]
	lift := st.hold.apply(e)
	request(t, e, name, to)
	e.Eventually(120*time.Second, fmt.Sprintf("towards %s: step %d (%s)", to, k, st.name), func(ctx context.Context) (bool, string, error) {
		m, c, err := getBoth(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		return step(m, c) >= k, describeMachine(m, c), nil
	})
	var doomed client.Object = &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "openshift-machine-api", Name: name}}
	if capiSide {
		doomed = &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "openshift-cluster-api", Name: name}}
	}
	if err := e.Client.Delete(ctx, doomed); err != nil {
		t.Fatal(err)
	}
	lift()
	e.Eventually(120*time.Second, "the deletion completed", func(ctx context.Context) (bool, string, error) {
		errM := e.Client.Get(ctx, client.ObjectKey{Namespace: "openshift-machine-api", Name: name}, &machinev1beta1.Machine{})
		c := &clusterv1.Machine{}
		errC := e.Client.Get(ctx, client.ObjectKey{Namespace: "openshift-cluster-api", Name: name}, c)
		capiSettled := apierrors.IsNotFound(errC) || errC == nil && c.DeletionTimestamp.IsZero() && !gate.HasPausedAnnotation(c)
		return apierrors.IsNotFound(errM) && capiSettled, fmt.Sprintf("mapi: %v; capi: %v deleting=%v paused=%v finalizers=%v",
			errM, errC, errC == nil && !c.DeletionTimestamp.IsZero(), errC == nil && gate.HasPausedAnnotation(c), c.Finalizers), nil
	})
	// The instance lives exactly as long as a Machine holds it.
	c := &clusterv1.Machine{}
	capiKept := e.Client.Get(ctx, client.ObjectKey{Namespace: "openshift-cluster-api", Name: name}, c) == nil
	if capiSide && capiKept {
		t.Errorf("the deleted Cluster API copy is still there: %s", describeMachine(&machinev1beta1.Machine{}, c))
	}
	e.Eventually(60*time.Second, "the instance follows the surviving copy", func(ctx context.Context) (bool, string, error) {
		list, err := e.Cloud.DescribeInstances(ctx, api.DescribeInstancesRequest{})
		if err != nil {
			return false, err.Error(), nil
		}
		alive := false
		for _, in := range list {
			if in.InstanceID == path.Base(providerID) && in.State.Alive() {
				alive = true
			}
		}
		return alive == capiKept, fmt.Sprintf("instance alive %v, Cluster API copy kept %v", alive, capiKept), nil
	})
	checkNoNewInstance(t, e, before)
	t.Logf("deleted at step %d towards %s: Cluster API copy kept %v", k, to, capiKept)
}
