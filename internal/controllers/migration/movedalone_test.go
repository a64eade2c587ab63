package migration_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/scheme"
	"github.com/machina-dev/machina/internal/testenv"
)

// A MachineSet moved to the Cluster API alone keeps a Machine the Machine API owns, whose
// Cluster API copy is a paused mirror. The Cluster API MachineSet's template then gains what
// that Machine lacks (a label, minReadySeconds): its in-place propagation must leave the
// paused mirror to the sync, or the two write the mirror back and forth for ever. Once
// settled, neither copy of the Machine changes its spec or metadata.
func testMachineSetMovedAloneNoWriteLoop(t *testing.T, e *testenv.Env) {
	ctx := context.Background()
	const set = "alone"
	if err := e.Client.Create(ctx, machineSet(set, 1)); err != nil {
		t.Fatal(err)
	}
	waitSet(t, e, set, 1)
	moveSet(t, e, set, machinev1beta1.MachineAuthorityClusterAPI)
	moveMachines(t, e, set, machinev1beta1.MachineAuthorityMachineAPI)

	_, ms, err := getSets(ctx, e, set)
	if err != nil {
		t.Fatal(err)
	}
	base := ms.DeepCopy()
	ms.Spec.Template.Labels = maps.Clone(ms.Spec.Template.Labels)
	ms.Spec.Template.Labels["tier"] = "gold"
	ms.Spec.Template.Spec.MinReadySeconds = ptr.To[int32](7)
	if err := e.Client.Patch(ctx, ms, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "the Machine API MachineSet mirrors the template", func(ctx context.Context) (bool, string, error) {
		m, c, err := getSets(ctx, e, set)
		if err != nil {
			return false, err.Error(), nil
		}
		return m.Status.SynchronizedGeneration == c.Generation && mapicond.IsTrue(m.Status.Conditions, authority.SynchronizedCondition) &&
			m.Spec.Template.Labels["tier"] == "gold", fmt.Sprintf("synchronized %d of %d", m.Status.SynchronizedGeneration, c.Generation), nil
	})

	// Let the passes the change started end, then count what is written for 20 s.
	time.Sleep(5 * time.Second)
	mapiWrites := countMachineChanges(t, e, &machinev1beta1.MachineList{}, mapiNS, set, 20*time.Second)
	capiWrites := countMachineChanges(t, e, &clusterv1.MachineList{}, capiNS, set, 20*time.Second)
	if n := <-mapiWrites + <-capiWrites; n > 0 {
		t.Fatalf("the Machine's copies changed spec or metadata %d time(s) in 20 s at steady state: a write loop", n)
	}
}

// countMachineChanges watches the MachineSet's Machines of one API for d and sends how many
// updates changed a generation, labels or annotations.
func countMachineChanges(t *testing.T, e *testenv.Env, list client.ObjectList, ns, set string, d time.Duration) <-chan int {
	t.Helper()
	wc, err := client.NewWithWatch(e.Lab.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), list, client.InNamespace(ns),
		client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": set})
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan int, 1)
	go func() {
		defer w.Stop()
		seen := map[string]client.Object{}
		changes := 0
		timeout := time.After(d)
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					out <- changes
					return
				}
				o, isObj := ev.Object.(client.Object)
				if !isObj {
					continue
				}
				if prev, had := seen[o.GetName()]; had && ev.Type == watch.Modified && metadataOrSpecChanged(prev, o) {
					if changes++; changes <= 3 {
						t.Logf("%s %s changed: generation %d→%d labels %v→%v", ns, o.GetName(), prev.GetGeneration(), o.GetGeneration(), prev.GetLabels(), o.GetLabels())
					}
				}
				seen[o.GetName()] = o
			case <-timeout:
				out <- changes
				return
			}
		}
	}()
	return out
}

func metadataOrSpecChanged(a, b client.Object) bool {
	return a.GetGeneration() != b.GetGeneration() || !maps.Equal(a.GetLabels(), b.GetLabels()) || !maps.Equal(a.GetAnnotations(), b.GetAnnotations())
}
