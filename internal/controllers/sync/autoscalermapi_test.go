package sync_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/testenv"
)

// TestAutoscalerOnMirrors runs OpenShift's cluster autoscaler's writes — its identity, its field
// manager, the scale subresource and the delete-machine annotation patch — against the mirror
// of a MachineSet in each direction, in a lab of its own that also runs the Cluster API
// controllers (which TestSync's does not) and the authority webhook: the autoscaler marks a
// Machine, then lowers replicas, and exactly that Machine goes on both sides.
func TestAutoscalerOnMirrors(t *testing.T) {
	t.Parallel() // its own lab, beside TestSync's
	e := testenv.Start(t, testenv.Options{Groups: "machineapi,sync,clusterapi,sim,admission"})
	e.SeedCluster(cluster)
	autoscaler := clientAs(t, e, autoscalerUser, "system:serviceaccounts", "system:serviceaccounts:openshift-machine-api", "system:masters")
	p := platforms()[0]
	t.Run("ClusterAPIAuthoritative_ScaledThroughMachineAPIMirror", func(t *testing.T) {
		testAutoscalerOnMachineAPIMirror(t, e.For(t), autoscaler, p)
	})
	t.Run("MachineAPIAuthoritative_MarkOnClusterAPIMirrorCarried", func(t *testing.T) {
		testAutoscalerOnClusterAPIMirror(t, e.For(t), autoscaler, p)
	})
}

// testAutoscalerOnMachineAPIMirror: the set belongs to the Cluster API (after a migration, or,
// here, from birth); OpenShift's autoscaler works with its Machine API mirror.
func testAutoscalerOnMachineAPIMirror(t *testing.T, e *testenv.Env, autoscaler client.Client, p platform) {
	ctx := context.Background()
	name := "capi-scaled"
	ms := p.machineSet(name, 3)
	ms.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
	ms.Spec.Template.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	machines := waitSetOnBoth(t, e, name, 3)
	mapiSet := &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: mapiNS, Name: name}}

	t.Run("AdministratorScaleRefused", func(t *testing.T) {
		e := e.For(t)
		admin := clientAs(t, e, "alice", "system:masters")
		err := scaleTo(ctx, admin, mapiSet, 5)
		if err == nil || !strings.Contains(err.Error(), "spec.replicas: Forbidden: MachineSet "+name+" is a mirror") {
			t.Fatalf("an administrator's scale of the Machine API mirror: %v; want it refused", err)
		}
	})
	t.Run("MarkedMachineGoesOnBothSides", func(t *testing.T) {
		e := e.For(t)
		victim := machines[1]
		// As the autoscaler does: mark, then lower replicas at once.
		m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: mapiNS, Name: victim}}
		if err := markAs(ctx, autoscaler, m, "machine.openshift.io/delete-machine", "2026-01-01 00:00:00 +0000 UTC"); err != nil {
			t.Fatalf("the autoscaler's mark on a Machine API mirror: %v", err)
		}
		if err := scaleTo(ctx, autoscaler, mapiSet, 2); err != nil {
			t.Fatalf("the autoscaler's scale of the Machine API mirror: %v", err)
		}
		left := waitSetOnBoth(t, e, name, 2)
		if want := slices.DeleteFunc(slices.Clone(machines), func(n string) bool { return n == victim }); !slices.Equal(left, want) {
			t.Fatalf("Machines left %v, want %v: the Cluster API MachineSet removed another than the marked %s", left, want, victim)
		}
	})
	t.Run("ScaleUpGrowsClusterAPIMachineSet", func(t *testing.T) {
		e := e.For(t)
		if err := scaleTo(ctx, autoscaler, mapiSet, 3); err != nil {
			t.Fatalf("the autoscaler's scale of the Machine API mirror: %v", err)
		}
		waitSetOnBoth(t, e, name, 3)
	})
	t.Run("MarkRemovedFromMirror_RemovedFromClusterAPI", func(t *testing.T) {
		e := e.For(t)
		machines := waitSetOnBoth(t, e, name, 3)
		m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: mapiNS, Name: machines[0]}}
		if err := markAs(ctx, autoscaler, m, "machine.openshift.io/cluster-api-delete-machine", "yes"); err != nil {
			t.Fatal(err)
		}
		waitCAPIMark(t, e, machines[0], true)
		if err := markAs(ctx, autoscaler, m, "machine.openshift.io/cluster-api-delete-machine", ""); err != nil {
			t.Fatal(err)
		}
		waitCAPIMark(t, e, machines[0], false)
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			t.Fatal(err)
		}
		if _, ok := m.Annotations["machine.openshift.io/delete-machine"]; ok {
			t.Errorf("the carried mark came back onto the Machine API mirror: %v", m.Annotations)
		}
	})
	_ = e.Client.Delete(ctx, mapiSet)
}

// testAutoscalerOnClusterAPIMirror: the set belongs to the Machine API; an autoscaler working
// with Cluster API MachineSets marks and scales its paused mirror.
func testAutoscalerOnClusterAPIMirror(t *testing.T, e *testenv.Env, autoscaler client.Client, p platform) {
	ctx := context.Background()
	name := "mapi-scaled"
	if err := e.Client.Create(ctx, p.machineSet(name, 3)); err != nil {
		t.Fatal(err)
	}
	machines := waitSetOnBoth(t, e, name, 3)
	victim := machines[2]
	c := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: capiNS, Name: victim}}
	if err := markAs(ctx, autoscaler, c, clusterv1.DeleteMachineAnnotation, "yes"); err != nil {
		t.Fatalf("the autoscaler's mark on a Cluster API mirror: %v", err)
	}
	capiSet := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: capiNS, Name: name}}
	if err := scaleTo(ctx, autoscaler, capiSet, 2); err != nil {
		t.Fatalf("the autoscaler's scale of the Cluster API mirror: %v", err)
	}
	left := waitSetOnBoth(t, e, name, 2)
	if want := machines[:2]; !slices.Equal(left, want) {
		t.Fatalf("Machines left %v, want %v: the Machine API MachineSet removed another than the marked %s", left, want, victim)
	}
	_ = e.Client.Delete(ctx, &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: mapiNS, Name: name}})
}

// markAs sets (value non-empty) or removes an annotation with a merge patch as the autoscaler.
func markAs(ctx context.Context, c client.Client, o client.Object, key, value string) error {
	v := "null"
	if value != "" {
		v = fmt.Sprintf("%q", value)
	}
	body := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, key, v)
	return c.Patch(ctx, o, client.RawPatch(types.MergePatchType, []byte(body)), client.FieldOwner(autoscalerManager))
}

// scaleTo writes replicas through the scale subresource with the autoscaler's field manager.
func scaleTo(ctx context.Context, c client.Client, set client.Object, replicas int32) error {
	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: set.GetNamespace(), Name: set.GetName()},
		Spec: autoscalingv1.ScaleSpec{Replicas: replicas}}
	return c.SubResource("scale").Update(ctx, set, client.WithSubResourceBody(scale), client.FieldOwner(autoscalerManager))
}

// waitSetOnBoth waits until both copies of the set ask for n replicas, the authoritative
// copy's latest generation is synchronised and n Machines of the same names live in each API,
// and returns their names, sorted. (A scale of the mirror while a change of the authoritative
// copy is still pending loses to that change, as docs/migration.md says; the autoscaler tries
// again on its next scan. The tests act only once there is nothing pending.)
func waitSetOnBoth(t *testing.T, e *testenv.Env, set string, n int32) []string {
	t.Helper()
	var names []string
	e.Eventually(180*time.Second, fmt.Sprintf("%d Machines of %s on both sides", n, set), func(ctx context.Context) (bool, string, error) {
		m, c, err := getMS(ctx, e, set)
		if err != nil {
			return false, err.Error(), nil
		}
		mapiNames, capiNames := liveMachines(ctx, e, set)
		names = mapiNames
		generation := m.Generation
		if m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityClusterAPI {
			generation = c.Generation
		}
		return ptr.Deref(m.Spec.Replicas, -1) == n && ptr.Deref(c.Spec.Replicas, -1) == n &&
				m.Status.SynchronizedGeneration == generation && len(mapiNames) == int(n) && slices.Equal(mapiNames, capiNames),
			fmt.Sprintf("replicas mapi %d capi %d, generation %d synchronised %d, Machines mapi %v capi %v", ptr.Deref(m.Spec.Replicas, -1),
				ptr.Deref(c.Spec.Replicas, -1), generation, m.Status.SynchronizedGeneration, mapiNames, capiNames), nil
	})
	return names
}

// liveMachines lists the names of the set's Machines not being deleted, in each API, sorted.
func liveMachines(ctx context.Context, e *testenv.Env, set string) (mapiNames, capiNames []string) {
	sel := client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": set}
	var mm machinev1beta1.MachineList
	var cm clusterv1.MachineList
	_ = e.Client.List(ctx, &mm, client.InNamespace(mapiNS), sel)
	_ = e.Client.List(ctx, &cm, client.InNamespace(capiNS), sel)
	for _, x := range mm.Items {
		if x.DeletionTimestamp.IsZero() {
			mapiNames = append(mapiNames, x.Name)
		}
	}
	for _, x := range cm.Items {
		if x.DeletionTimestamp.IsZero() {
			capiNames = append(capiNames, x.Name)
		}
	}
	slices.Sort(mapiNames)
	slices.Sort(capiNames)
	return mapiNames, capiNames
}

// waitCAPIMark waits until the Cluster API Machine has (or has not) cluster.x-k8s.io/delete-machine.
func waitCAPIMark(t *testing.T, e *testenv.Env, name string, want bool) {
	t.Helper()
	e.Eventually(60*time.Second, fmt.Sprintf("delete mark on Cluster API Machine %s: %v", name, want), func(ctx context.Context) (bool, string, error) {
		c, err := getCAPI(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		_, ok := c.Annotations[clusterv1.DeleteMachineAnnotation]
		return ok == want, fmt.Sprintf("annotations %v", c.Annotations), nil
	})
}
