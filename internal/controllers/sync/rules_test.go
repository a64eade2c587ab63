package sync_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/testenv"
)

func countBoth(ctx context.Context, e *testenv.Env, set string) (int, int, string) {
	sel := client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": set}
	var mm machinev1beta1.MachineList
	var cm clusterv1.MachineList
	_ = e.Client.List(ctx, &mm, client.InNamespace(mapiNS), sel)
	_ = e.Client.List(ctx, &cm, client.InNamespace(capiNS), sel)
	m, c, desc := 0, 0, ""
	for _, x := range mm.Items {
		if x.DeletionTimestamp.IsZero() {
			m++
			desc += " mapi:" + x.Name
		}
	}
	for _, x := range cm.Items {
		if x.DeletionTimestamp.IsZero() {
			c++
			desc += " capi:" + x.Name
		}
	}
	return m, c, desc
}

// Rows of the creation and deletion table about owned Machines, and the steady state.
func testOwnedDeletionsAndSteadyState(t *testing.T, p platform) {
	e := env.For(t)
	ctx := context.Background()
	if err := e.Client.Create(ctx, p.machineSet(p.name("owned"), 2)); err != nil {
		t.Fatal(err)
	}
	waitCount := func(what string, wantM, wantC int) {
		e.Eventually(90*time.Second, what, func(ctx context.Context) (bool, string, error) {
			m, c, desc := countBoth(ctx, e, p.name("owned"))
			return m == wantM && c == wantC, desc, nil
		})
	}
	waitCount("two mirrored Machines", 2, 2)

	t.Run("OwnedMAPIMachineDeleted_CAPIMirrorDeleted", func(t *testing.T) {
		ms := &machinev1beta1.MachineSet{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: mapiNS, Name: p.name("owned")}, ms); err != nil {
			t.Fatal(err)
		}
		base := ms.DeepCopy()
		ms.Spec.Replicas = ptr.To[int32](1) // the MachineSet deletes one of its Machines
		if err := e.Client.Patch(ctx, ms, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
		waitCount("one Machine left on both sides", 1, 1)
	})

	t.Run("OwnedCAPIMachineDeleted_MAPIMirrorDeleted", func(t *testing.T) {
		var cm clusterv1.MachineList
		if err := e.Client.List(ctx, &cm, client.InNamespace(capiNS), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": p.name("owned")}); err != nil {
			t.Fatal(err)
		}
		// The Machine the previous row scaled away may still be on its way out: pick a live one.
		i := slices.IndexFunc(cm.Items, func(m clusterv1.Machine) bool { return m.DeletionTimestamp.IsZero() })
		if i < 0 {
			t.Fatalf("no live Cluster API Machine of owned among %d", len(cm.Items))
		}
		victim := cm.Items[i].Name
		if err := e.Client.Delete(ctx, &cm.Items[i]); err != nil {
			t.Fatal(err)
		}
		// The deletion crosses to the Machine API copy; the Machine API MachineSet replaces it.
		e.Eventually(90*time.Second, "victim gone from both APIs and replaced", func(ctx context.Context) (bool, string, error) {
			errM := e.Client.Get(ctx, client.ObjectKey{Namespace: mapiNS, Name: victim}, &machinev1beta1.Machine{})
			m, c, desc := countBoth(ctx, e, p.name("owned"))
			return errM != nil && m == 1 && c == 1 && !contains(desc, victim), fmt.Sprintf("%v %s", errM, desc), nil
		})
	})

	t.Run("SteadyStateWritesNothing", func(t *testing.T) {
		var m machinev1beta1.MachineList
		e.Eventually(90*time.Second, "settled", func(ctx context.Context) (bool, string, error) {
			if err := e.Client.List(ctx, &m, client.InNamespace(mapiNS), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": p.name("owned")}); err != nil {
				return false, err.Error(), nil
			}
			ok := len(m.Items) == 1 && m.Items[0].Status.Phase != nil && *m.Items[0].Status.Phase == "Running" &&
				m.Items[0].Status.SynchronizedGeneration == m.Items[0].Generation
			return ok, fmt.Sprint(len(m.Items)), nil
		})
		name := m.Items[0].Name
		versions := func() string {
			mm, cm, sm := &machinev1beta1.Machine{}, &clusterv1.Machine{}, p.emptyInfraMachine()
			_ = e.Client.Get(ctx, client.ObjectKey{Namespace: mapiNS, Name: name}, mm)
			_ = e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: name}, cm)
			_ = e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: name}, sm)
			return mm.ResourceVersion + "/" + cm.ResourceVersion + "/" + sm.GetResourceVersion()
		}
		time.Sleep(3 * time.Second) // let the last status settle
		before := versions()
		time.Sleep(6 * time.Second) // three resync periods of every controller
		if after := versions(); after != before {
			t.Fatalf("a steady pair of copies was written to: resourceVersions %s -> %s", before, after)
		}
	})
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
