package fleet

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/machina-dev/machina/internal/scheme"
)

// The runner's own logic, against a fake client standing in for the API server and the
// migration controller (the lab tests, internal/cli's TestMigrateFleet, run the real ones).

const ns = "ns"

// world is a fake cluster of Machines whose "controller" acts on each request as react says.
type world struct {
	c            client.Client
	gets, lists  atomic.Int32
	react        func(name string) string // "move", "stay" or "delete"
	machineNames []Item
}

func newWorld(t *testing.T, n int, react func(name string) string) *world {
	w := &world{react: react}
	var objs []client.Object
	for i := range n {
		name := fmt.Sprintf("m-%02d", i)
		objs = append(objs, &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:   machinev1beta1.MachineSpec{AuthoritativeAPI: machinev1beta1.MachineAuthorityMachineAPI},
			Status: machinev1beta1.MachineStatus{AuthoritativeAPI: machinev1beta1.MachineAuthorityMachineAPI}})
		w.machineNames = append(w.machineNames, Item{Kind: Machine, Name: name})
	}
	w.c = fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			w.gets.Add(1)
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			w.lists.Add(1)
			return c.List(ctx, list, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if err := c.Patch(ctx, obj, patch, opts...); err != nil {
				return err
			}
			m := obj.(*machinev1beta1.Machine)
			switch w.react(m.Name) {
			case "move":
				m.Status.AuthoritativeAPI = m.Spec.AuthoritativeAPI
				return c.Update(ctx, m)
			case "delete":
				return c.Delete(ctx, m)
			}
			return nil
		},
	}).Build()
	return w
}

func (w *world) run(t *testing.T, ctx context.Context, o Options) *Report {
	t.Helper()
	o.Namespace, o.To = ns, machinev1beta1.MachineAuthorityClusterAPI
	if o.Poll == 0 {
		o.Poll = 20 * time.Millisecond
	}
	rep, err := Run(ctx, w.c, Waves(w.machineNames), nil, o)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func results(rep *Report) string {
	var s []string
	for _, r := range rep.Resources {
		s = append(s, r.Name+"="+string(r.Result))
	}
	return strings.Join(s, " ")
}

// Many in flight are read with one list a poll, not a read each; a Machine deleted while it
// moves is gone, not failed, and the run is complete.
func TestRunListsWhenManyInFlight(t *testing.T) {
	w := newWorld(t, 25, func(name string) string {
		if name == "m-07" {
			return "delete"
		}
		return "move"
	})
	rep := w.run(t, context.Background(), Options{MaxInFlight: 100})
	if rep.Count(Migrated) != 24 || rep.Count(Gone) != 1 || !rep.Complete() {
		t.Fatalf("results: %s", results(rep))
	}
	if w.gets.Load() != 0 || w.lists.Load() < 2 {
		t.Errorf("%d reads and %d lists; want lists only (one to start, one a poll)", w.gets.Load(), w.lists.Load())
	}
}

// A resource that does not move within the timeout fails; with PauseOnFailure nothing more
// is asked, without it the run goes on.
func TestRunTimeout(t *testing.T) {
	react := func(name string) string {
		if name == "m-01" {
			return "stay"
		}
		return "move"
	}
	w := newWorld(t, 3, react)
	rep := w.run(t, context.Background(), Options{MaxInFlight: 1, Timeout: 200 * time.Millisecond, PauseOnFailure: true})
	if got := results(rep); got != "m-00=migrated m-01=failed m-02=not-started" {
		t.Fatalf("paused run: %s", got)
	}
	if !strings.Contains(rep.PausedBy, "machine/m-01 failed: did not finish within 200ms") {
		t.Errorf("paused by %q", rep.PausedBy)
	}
	if w.gets.Load() == 0 {
		t.Error("few in flight, yet no single reads")
	}
	w = newWorld(t, 3, react)
	rep = w.run(t, context.Background(), Options{MaxInFlight: 1, Timeout: 200 * time.Millisecond})
	if got := results(rep); got != "m-00=migrated m-01=failed m-02=migrated" || rep.PausedBy != "" {
		t.Fatalf("run without pausing: %s (paused by %q)", got, rep.PausedBy)
	}
}

// Cancelled (Ctrl-C), a run returns at once: the resource asked is in flight, the rest not
// started, and the report says it was interrupted.
func TestRunInterrupted(t *testing.T) {
	w := newWorld(t, 3, func(string) string { return "stay" })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := Options{MaxInFlight: 1, Poll: time.Hour, Events: func(e Event) {
		if e.Type == ItemRequested {
			cancel()
		}
	}}
	start := time.Now()
	rep := w.run(t, ctx, o)
	if got := results(rep); got != "m-00=in-flight m-01=not-started m-02=not-started" || !rep.Interrupted {
		t.Fatalf("interrupted run: %s, interrupted %v", got, rep.Interrupted)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("returned %s after the cancel", d)
	}
}

// A handover is seen finished when the watch brings its new status, not at the next read:
// with reads an hour apart, a run of three, one at a time, still finishes at once, and
// without a single read of a resource.
func TestRunFollowsWithAWatch(t *testing.T) {
	w := newWorld(t, 3, func(string) string { return "move" })
	start := time.Now()
	rep := w.run(t, context.Background(), Options{MaxInFlight: 1, Poll: time.Hour})
	if got := results(rep); got != "m-00=migrated m-01=migrated m-02=migrated" {
		t.Fatalf("results: %s", got)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s with reads an hour apart", d)
	}
	if w.gets.Load() != 0 {
		t.Errorf("%d reads; the watch alone should have followed the run", w.gets.Load())
	}
}
