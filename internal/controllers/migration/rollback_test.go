package migration_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/controllers/migration"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/scheme"
	"github.com/machina-dev/machina/internal/testenv"
)

// testRollbackFromEveryStep stops a handover at each of its steps, in both directions, and
// asks for the old authority back: the rollback must leave exactly one side active — the old
// one, its controllers unpaused and holding their finalizer, the other side paused and saying
// so — with the same instance and nothing launched.
func testRollbackFromEveryStep(t *testing.T, e *testenv.Env, pc platformCase) {
	ctx := context.Background()
	name := pc.name("fickle")
	if err := e.Client.Create(ctx, pc.machine(name, 0)); err != nil {
		t.Fatal(err)
	}
	providerID := waitRunningUnder(t, e, name, machinev1beta1.MachineAuthorityMachineAPI, "")
	before, err := e.Cloud.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	active := watchActive(t, e, name)
	for k, st := range crashSteps(name, machinev1beta1.MachineAuthorityClusterAPI) {
		rollbackAt(t, e, name, machinev1beta1.MachineAuthorityClusterAPI, stepToClusterAPI, k+1, st, providerID)
	}
	request(t, e, name, machinev1beta1.MachineAuthorityClusterAPI)
	waitRunningUnder(t, e, name, machinev1beta1.MachineAuthorityClusterAPI, providerID)
	for k, st := range crashSteps(name, machinev1beta1.MachineAuthorityMachineAPI) {
		rollbackAt(t, e, name, machinev1beta1.MachineAuthorityMachineAPI, stepToMachineAPI, k+1, st, providerID)
	}
	checkNoNewInstance(t, e, before)
	for _, b := range active.bothActive() {
		t.Errorf("both sides active %s", b)
	}
}

// rollbackAt requests the move to `to`, holds it once it has reached step k, requests the old
// authority back, lifts the hold and checks the rolled-back state.
func rollbackAt(t *testing.T, e *testenv.Env, name string, to machinev1beta1.MachineAuthority, step machineStep, k int, st crashStep, providerID string) {
	t.Helper()
	from := machinev1beta1.MachineAuthorityMachineAPI
	if to == from {
		from = machinev1beta1.MachineAuthorityClusterAPI
	}
	lift := st.hold.apply(e)
	request(t, e, name, to)
	e.Eventually(120*time.Second, fmt.Sprintf("towards %s: step %d (%s)", to, k, st.name), func(ctx context.Context) (bool, string, error) {
		m, c, err := getBoth(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		return step(m, c) >= k, describeMachine(m, c), nil
	})
	request(t, e, name, from)
	lift()
	waitRunningUnder(t, e, name, from, providerID)
	m, _, err := getBoth(context.Background(), e, name)
	if err != nil {
		t.Fatal(err)
	}
	if mc := mapicond.Get(m.Status.Conditions, migration.MigrationCondition); mc == nil || mc.Reason != migration.RolledBackReason {
		t.Errorf("rolled back from step %d towards %s: AuthorityMigration %s", k, to, cond(m, migration.MigrationCondition))
	}
	t.Logf("rolled back to %s from step %d (%s) towards %s", from, k, st.name, to)
}

// waitRunningUnder waits until exactly one side — authority's — is active for the Machine:
// its status says so, the other side is paused and reports Paused=True, only the active
// side's controller finalizer is on, and the instance is the same. It returns the providerID.
func waitRunningUnder(t *testing.T, e *testenv.Env, name string, authority machinev1beta1.MachineAuthority, providerID string) string {
	t.Helper()
	capiActive := authority == machinev1beta1.MachineAuthorityClusterAPI
	e.Eventually(120*time.Second, fmt.Sprintf("%s active under %s alone", name, authority), func(ctx context.Context) (bool, string, error) {
		m, c, err := getBoth(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		pc := meta.FindStatusCondition(c.Status.Conditions, clusterv1.PausedCondition)
		capiPausedAck := pc != nil && pc.Status == "True" && pc.ObservedGeneration >= c.Generation
		mapiPausedAck := condStatus(m.Status.Conditions, gate.PausedCondition) == "True"
		if providerID == "" && m.Spec.ProviderID != nil {
			providerID = *m.Spec.ProviderID
		}
		ok := m.Status.AuthoritativeAPI == authority && m.Spec.AuthoritativeAPI == authority &&
			m.Status.Phase != nil && *m.Status.Phase == "Running" && m.Spec.ProviderID != nil && *m.Spec.ProviderID == providerID &&
			gate.HasPausedAnnotation(c) != capiActive && capiPausedAck != capiActive && mapiPausedAck == capiActive &&
			capiFinalizerAsActive(e, c, capiActive) &&
			controllerutil.ContainsFinalizer(m, machinev1beta1.MachineFinalizer) != capiActive &&
			mapicond.IsTrue(m.Status.Conditions, "Synchronized")
		return ok, describeMachine(m, c), nil
	})
	return providerID
}

// activeWatch records every version of one Machine's two copies the apiserver reports and
// finds the moments both sides were active: the Machine API copy's status naming the
// Machine API while the Cluster API copy carried no paused annotation. Both watches read one
// etcd, whose resourceVersions order all writes, so merging them by resourceVersion replays
// the writes as they happened (the test relies on etcd's integer revisions, which the API
// treats as opaque).
type activeWatch struct {
	mu     sync.Mutex
	events []pairEvent
}

type pairEvent struct {
	rv     int64
	mapi   bool // a Machine API event (else Cluster API)
	active bool
	desc   string
}

func watchActive(t *testing.T, e *testenv.Env, name string) *activeWatch {
	wc, err := client.NewWithWatch(e.Lab.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	aw := &activeWatch{}
	for _, l := range []client.ObjectList{&machinev1beta1.MachineList{}, &clusterv1.MachineList{}} {
		w, err := wc.Watch(context.Background(), l, client.MatchingFields{"metadata.name": name})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		t.Cleanup(func() { w.Stop(); <-done })
		go func() {
			defer close(done)
			for ev := range w.ResultChan() {
				o, ok := ev.Object.(client.Object)
				if !ok {
					continue
				}
				rv, _ := strconv.ParseInt(o.GetResourceVersion(), 10, 64)
				pe := pairEvent{rv: rv}
				switch o := o.(type) {
				case *machinev1beta1.Machine:
					pe.mapi, pe.active = true, o.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityMachineAPI
					pe.desc = fmt.Sprintf("mapi status %q", o.Status.AuthoritativeAPI)
				case *clusterv1.Machine:
					pe.active = !gate.HasPausedAnnotation(o)
					pe.desc = fmt.Sprintf("capi paused-annotation %v", !pe.active)
				}
				aw.mu.Lock()
				aw.events = append(aw.events, pe)
				aw.mu.Unlock()
			}
		}()
	}
	return aw
}

// bothActive replays the recorded writes in order and describes each moment both copies
// were active.
func (aw *activeWatch) bothActive() []string {
	aw.mu.Lock()
	evs := slices.Clone(aw.events)
	aw.mu.Unlock()
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].rv < evs[j].rv })
	var mapi, capi *pairEvent
	var out []string
	for i := range evs {
		if evs[i].mapi {
			mapi = &evs[i]
		} else {
			capi = &evs[i]
		}
		if mapi != nil && capi != nil && mapi.active && capi.active {
			out = append(out, fmt.Sprintf("at resourceVersion %d: %s, %s", evs[i].rv, mapi.desc, capi.desc))
		}
	}
	return out
}
