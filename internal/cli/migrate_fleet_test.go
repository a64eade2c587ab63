package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/demo"
	"github.com/machina-dev/machina/internal/fleet"
	"github.com/machina-dev/machina/internal/testenv"
)

// TestMigrateFleet moves the demo's fleet (two MachineSets, four Machines, a
// MachineHealthCheck) with `machina migrate` against a lab: the waves of a dry run and of a
// label selector; --all to the Cluster API pausing at a Machine whose request the API server
// refuses (the Machines before it moved, the ones after it not asked) and going on when run
// again; --all back; a MachineSet --with-machines; and Ctrl-C in the middle of a run.
func TestMigrateFleet(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Groups: "machineapi,sync,migration,clusterapi,sim"})
	ctx := context.Background()
	cl := e.SeedCluster("lab")
	if err := demo.EnsureWorkload(ctx, e.Client, cl); err != nil {
		t.Fatal(err)
	}
	ns := cl.MachineAPINamespace
	waitFleetReady(t, e, cl, machinev1beta1.MachineAuthorityClusterAPI, 4)
	machines := fleetMachines(t, e, ns)
	kc := "--kubeconfig=" + e.Lab.KubeconfigPath
	dir := t.TempDir()

	// A dry run lists the waves and changes nothing; -l narrows them.
	out, errOut, code := runCommand(t, newMigrateCommand, kc, "--all", "--to", "ClusterAPI", "--dry-run", "--max-in-flight", "3")
	if code != 0 {
		t.Fatalf("dry run: exit %d: %s%s", code, out, errOut)
	}
	wantAll(t, "dry run", out, "wave 1: 2 MachineSet(s), at most 3 at a time: lab-worker-a, lab-worker-b",
		"wave 2: 4 Machine(s), at most 3 at a time: "+strings.Join(machines, ", "),
		"wave 3: 1 MachineHealthCheck(s), at most 3 at a time: lab-workers", "dry run: nothing was changed")
	wantAuthority(t, e, ns, machinev1beta1.MachineAuthorityMachineAPI, "MachineSet/lab-worker-a", "Machine/"+machines[0])
	labelFleet(t, e, ns, "fleet-test", "b", "MachineSet/lab-worker-b", "Machine/"+machines[2], "Machine/"+machines[3])
	out, _, _ = runCommand(t, newMigrateCommand, kc, "-l", "fleet-test=b", "--to", "ClusterAPI", "--dry-run")
	wantAll(t, "dry run -l", out, "wave 1: 1 MachineSet(s), at most 10 at a time: lab-worker-b",
		"wave 2: 2 Machine(s), at most 10 at a time: "+machines[2]+", "+machines[3])
	if strings.Contains(out, "wave 3") {
		t.Errorf("dry run -l includes the MachineHealthCheck:\n%s", out)
	}

	// A named resource that does not exist stops the command before anything is asked.
	_, errOut, code = runCommand(t, newMigrateCommand, kc, "ms/lab-worker-a", "ms/nope", "--to", "ClusterAPI")
	if code != 1 || !strings.Contains(errOut, "machineset/nope not found in namespace "+ns) {
		t.Fatalf("a MachineSet that does not exist: exit %d: %s", code, errOut)
	}
	if ms := fleetObject(t, e, ns, "MachineSet/lab-worker-a").(*machinev1beta1.MachineSet); ms.Spec.AuthoritativeAPI != machinev1beta1.MachineAuthorityMachineAPI {
		t.Fatalf("lab-worker-a was asked to move (spec %q) though the command stopped first", ms.Spec.AuthoritativeAPI)
	}

	// A change freeze on the third Machine: the run pauses there.
	lift := testenv.Hold{What: "a change freeze on " + machines[2], Group: "machine.openshift.io", Resource: "machines",
		Deny: fmt.Sprintf("object.metadata.name == %q && (has(object.spec.authoritativeAPI) ? object.spec.authoritativeAPI : '') != "+
			"(has(oldObject.spec.authoritativeAPI) ? oldObject.spec.authoritativeAPI : '')", machines[2])}.Apply(e)
	report := filepath.Join(dir, "first.json")
	all := []string{kc, "--all", "--to", "ClusterAPI", "--max-in-flight", "1", "--timeout", "2m"}
	out, errOut, code = runCommand(t, newMigrateCommand, append(all, "--report", report)...)
	t.Logf("first run:\n%s%s", out, errOut)
	if code != 1 {
		t.Fatalf("first run: exit %d, want 1", code)
	}
	wantAll(t, "first run", out+errOut, "machine/"+machines[2]+": FAILED: request refused", "held by the test",
		"paused: machine/"+machines[2]+" failed", "run the same command again", "report written to "+report)
	wantReport(t, report, map[string]fleet.Outcome{"MachineSet/lab-worker-a": fleet.Migrated, "MachineSet/lab-worker-b": fleet.Migrated,
		"Machine/" + machines[0]: fleet.Migrated, "Machine/" + machines[1]: fleet.Migrated, "Machine/" + machines[2]: fleet.Failed,
		"Machine/" + machines[3]: fleet.NotStarted, "MachineHealthCheck/lab-workers": fleet.NotStarted})
	wantAuthority(t, e, ns, machinev1beta1.MachineAuthorityMachineAPI, "Machine/"+machines[2], "Machine/"+machines[3])

	// Lifted, the same command goes on from where it stopped.
	lift()
	report = filepath.Join(dir, "second.json")
	out, errOut, code = runCommand(t, newMigrateCommand, append(all, "--report", report)...)
	if code != 0 {
		t.Fatalf("second run: exit %d:\n%s%s", code, out, errOut)
	}
	wantAll(t, "second run", out, "all 7 resource(s) are ClusterAPI-authoritative")
	wantReport(t, report, map[string]fleet.Outcome{"MachineSet/lab-worker-a": fleet.Already, "MachineSet/lab-worker-b": fleet.Already,
		"Machine/" + machines[0]: fleet.Already, "Machine/" + machines[1]: fleet.Already, "Machine/" + machines[2]: fleet.Migrated,
		"Machine/" + machines[3]: fleet.Migrated, "MachineHealthCheck/lab-workers": fleet.Migrated})

	// And back.
	waitFleetReady(t, e, cl, machinev1beta1.MachineAuthorityMachineAPI, 4)
	out, errOut, code = runCommand(t, newMigrateCommand, kc, "--all", "--to", "MachineAPI", "--timeout", "2m")
	if code != 0 {
		t.Fatalf("--all --to MachineAPI: exit %d:\n%s%s", code, out, errOut)
	}
	wantAuthority(t, e, ns, machinev1beta1.MachineAuthorityMachineAPI, "MachineSet/lab-worker-a", "MachineSet/lab-worker-b",
		"Machine/"+machines[0], "Machine/"+machines[1], "Machine/"+machines[2], "Machine/"+machines[3])

	// One MachineSet with its Machines; the other set's Machines stay.
	waitFleetReady(t, e, cl, machinev1beta1.MachineAuthorityClusterAPI, 4)
	out, errOut, code = runCommand(t, newMigrateCommand, kc, "ms/lab-worker-a", "--with-machines", "--to", "ClusterAPI", "--timeout", "2m")
	if code != 0 {
		t.Fatalf("--with-machines: exit %d:\n%s%s", code, out, errOut)
	}
	wantAll(t, "--with-machines", out, "all 3 resource(s) are ClusterAPI-authoritative")
	wantAuthority(t, e, ns, machinev1beta1.MachineAuthorityClusterAPI, "MachineSet/lab-worker-a", "Machine/"+machines[0], "Machine/"+machines[1])
	wantAuthority(t, e, ns, machinev1beta1.MachineAuthorityMachineAPI, "MachineSet/lab-worker-b", "Machine/"+machines[2], "Machine/"+machines[3])

	// Ctrl-C once the first request is made: nothing more is asked, the one in flight is
	// named and its controllers finish it.
	waitFleetReady(t, e, cl, machinev1beta1.MachineAuthorityClusterAPI, 4)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &cancelWriter{cancel: cancel, on: ": requested"}
	code, errText := runMigrateCtx(cctx, kc, w, "--all", "--to", "ClusterAPI", "--max-in-flight", "1")
	t.Logf("interrupted run:\n%s%s", w.String(), errText)
	if code != migrateExitInterrupted {
		t.Fatalf("interrupted: exit %d, want %d", code, migrateExitInterrupted)
	}
	wantAll(t, "interrupted", errText, "interrupted: no new requests made; 1 still in flight", "machineset/lab-worker-b")
	e.Eventually(2*time.Minute, "the MachineSet in flight finishes", func(ctx context.Context) (bool, string, error) {
		ms := &machinev1beta1.MachineSet{}
		err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "lab-worker-b"}, ms)
		return err == nil && ms.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityClusterAPI, string(ms.Status.AuthoritativeAPI), err
	})
	wantAuthority(t, e, ns, machinev1beta1.MachineAuthorityMachineAPI, "Machine/"+machines[2], "Machine/"+machines[3])
}

// fleetMachines returns the Machine API Machines' names in list order (the order of plan and
// of the waves).
func fleetMachines(t *testing.T, e *testenv.Env, ns string) []string {
	var l machinev1beta1.MachineList
	if err := e.Client.List(context.Background(), &l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range l.Items {
		names = append(names, m.Name)
	}
	if !slices.IsSorted(names) {
		t.Fatalf("Machines not listed in name order: %v", names)
	}
	return names
}

// waitFleetReady waits until machina plan calls every resource in the namespaces ready to
// move to the API to (or already there) and there are n Machines.
func waitFleetReady(t *testing.T, e *testenv.Env, cl demo.Cluster, to machinev1beta1.MachineAuthority, n int) {
	t.Helper()
	ns := authority.Namespaces{MachineAPI: cl.MachineAPINamespace, ClusterAPI: cl.ClusterAPINamespace}
	e.Eventually(2*time.Minute, "every resource ready to move to "+string(to), func(ctx context.Context) (bool, string, error) {
		items, err := planWith(ctx, e.Client, ns, to)
		if err != nil {
			return false, "", err
		}
		machines := 0
		for _, it := range items {
			if it.kind == fleet.Machine {
				machines++
			}
			if len(it.blockers) > 0 {
				return false, it.kind + " " + it.name + ": " + it.blockers[0], nil
			}
		}
		return machines == n, fmt.Sprintf("%d Machines", machines), nil
	})
}

// labelFleet sets label key=value on the resources named Kind/name.
func labelFleet(t *testing.T, e *testenv.Env, ns, key, value string, names ...string) {
	for _, kn := range names {
		obj := fleetObject(t, e, ns, kn)
		base := obj.DeepCopyObject().(client.Object)
		obj.SetLabels(authority.MergeMap(obj.GetLabels(), map[string]string{key: value}))
		if err := e.Client.Patch(context.Background(), obj, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
	}
}

// wantAuthority checks the status authority of the resources named Kind/name.
func wantAuthority(t *testing.T, e *testenv.Env, ns string, want machinev1beta1.MachineAuthority, names ...string) {
	t.Helper()
	for _, kn := range names {
		var got machinev1beta1.MachineAuthority
		switch o := fleetObject(t, e, ns, kn).(type) {
		case *machinev1beta1.Machine:
			got = o.Status.AuthoritativeAPI
		case *machinev1beta1.MachineSet:
			got = o.Status.AuthoritativeAPI
		}
		if got != want {
			t.Errorf("%s: authority %q, want %q", kn, got, want)
		}
	}
}

func fleetObject(t *testing.T, e *testenv.Env, ns, kindName string) client.Object {
	kind, name, _ := strings.Cut(kindName, "/")
	var obj client.Object = &machinev1beta1.Machine{}
	if kind == fleet.MachineSet {
		obj = &machinev1beta1.MachineSet{}
	}
	if err := e.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// wantReport checks each resource's result in a --report file, and that every resource
// asked has a start and every finished one an end.
func wantReport(t *testing.T, path string, want map[string]fleet.Outcome) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep fleet.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	got := map[string]fleet.Outcome{}
	for _, r := range rep.Resources {
		got[r.Kind+"/"+r.Name] = r.Result
		if (r.Result == fleet.Migrated || r.Result == fleet.Failed) && r.End == nil {
			t.Errorf("%s/%s %s without an end", r.Kind, r.Name, r.Result)
		}
		if r.Result == fleet.Migrated && (r.Start == nil || r.From == "" || r.To == "") {
			t.Errorf("%s/%s migrated without start, from or to: %+v", r.Kind, r.Name, r)
		}
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("report %s: %s is %q, want %q", filepath.Base(path), k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("report %s has %d resources, want %d: %v", filepath.Base(path), len(got), len(want), got)
	}
}

// cancelWriter collects output and cancels once it has seen on.
type cancelWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	on     string
	cancel func()
}

func (w *cancelWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.on) {
		w.cancel()
	}
	return len(p), nil
}

func (w *cancelWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// runMigrateCtx runs machina migrate with ctx, its output to out; it returns the exit code and
// the error's text.
func runMigrateCtx(ctx context.Context, kc string, out *cancelWriter, args ...string) (int, string) {
	cmd := newMigrateCommand()
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	cmd.SetOut(out)
	cmd.SetErr(out)
	cmd.SetArgs(append([]string{kc}, args...))
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return 0, ""
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code, err.Error()
	}
	return 1, err.Error()
}
