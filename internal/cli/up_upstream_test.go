package cli

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/cloud/api"
	cloudclient "github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/demo"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/scheme"
)

// TestUpUpstreamFlag: --upstream refuses, before anything starts, the platforms and flags it
// cannot go with, naming the flag; --help describes it.
func TestUpUpstreamFlag(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--upstream"}, "--upstream applies to --platform aws only"},
		{[]string{"--upstream", "--platform", "aws", "--capa=false"}, "--upstream runs CAPA"},
		{[]string{"--upstream", "--platform", "aws", "--no-demo"}, "--upstream needs the demo cluster"},
		{[]string{"--upstream", "--platform", "aws", "--controllers", "sync,migration,machineapi"}, `group "machineapi" does what the upstream controllers do`},
	} {
		_, errOut, code := runCommand(t, newUpCommand, append([]string{"--state-dir", dir}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("up %v: exit %d, want 2 and %q: %s", c.args, code, c.want, errOut)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a refused start left %d entries in the state directory", len(entries))
	}
	help, _, _ := runCommand(t, newUpCommand, "--help")
	wantAll(t, "up --help", help, "--upstream", "machine-api-operator's MachineSet", "upstream Cluster API core", "sync,migration,admission,opsmetrics")
}

// TestUpUpstreamLab is `machina up --platform aws --upstream` as a user meets it: the demo's
// Machine API Machines run under machine-api-operator's controllers (its own Paused message),
// machina runs only the migration's groups, and `machina migrate` hands a MachineSet with
// its Machine to the Cluster API and back keeping their instances; in between the upstream
// Cluster API core and CAPA launch one Machine on a scale-up and a scale-down terminates
// exactly one instance.
func TestUpUpstreamLab(t *testing.T) {
	_, u, logFile, progress := startTestUpLab(t, t.TempDir(), "--platform", "aws", "--upstream")
	t.Cleanup(func() {
		u.stop()
		if t.Failed() {
			b, _ := os.ReadFile(logFile)
			t.Logf("progress:\n%s\nmanager log (tail):\n%s", progress.String(), tail(string(b), 60))
		}
	})
	wantAll(t, "progress", progress.String(), "4 controller group(s) running: sync, migration, admission, opsmetrics",
		"upstream controllers running: machine-api-operator")
	c, err := client.New(u.lab.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	mapiNS, capiNS := manager.Env{}.Namespaces()
	cl := demo.DefaultAWSCluster(mapiNS, capiNS, nil)
	machines := waitAWSMachines(t, c, cl)
	checkMAOPaused(t, c, machines)
	cloud, err := cloudclient.New(u.cloud.URL(), cloudclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	before := runningInstances(t, cloud)

	set := cl.MachineSetNames()[0]
	i := slices.IndexFunc(machines, func(m machinev1beta1.Machine) bool {
		return m.Labels["machine.openshift.io/cluster-api-machineset"] == set
	})
	mig := []string{"--kubeconfig=" + u.lab.KubeconfigPath, "machineset/" + set, "machine/" + machines[i].Name, "--wait", "--timeout", "4m"}
	migrate(t, append(mig, "--to", "ClusterAPI"))
	if got := runningInstances(t, cloud); !slices.Equal(got, before) {
		t.Fatalf("after the handover to the Cluster API the running instances are %v, want %v", got, before)
	}

	scaleCAPI(t, c, capiNS, set, 2)
	waitCAPIRunning(t, c, capiNS, set, 2)
	if got := runningInstances(t, cloud); len(got) != len(before)+1 {
		t.Fatalf("after a Cluster API scale-up to 2: running instances %v, want one more than %v", got, before)
	}
	scaleCAPI(t, c, capiNS, set, 1)
	waitCAPIRunning(t, c, capiNS, set, 1)
	poll(t, 3*time.Minute, "one instance terminated by the scale-down", func(context.Context) (bool, string, error) {
		got := runningInstances(t, cloud)
		return len(got) == len(before), fmt.Sprint(got), nil
	})

	// The MachineSet's Machine now may be the new one: hand back whichever it has.
	var capiMachines clusterv1.MachineList
	if err := c.List(context.Background(), &capiMachines, client.InNamespace(capiNS), client.MatchingLabels{clusterv1.MachineSetNameLabel: set}); err != nil {
		t.Fatal(err)
	}
	kept := runningInstances(t, cloud)
	mig = []string{"--kubeconfig=" + u.lab.KubeconfigPath, "machineset/" + set, "--wait", "--timeout", "4m"}
	for _, m := range capiMachines.Items {
		if m.DeletionTimestamp.IsZero() {
			mig = append(mig, "machine/"+m.Name)
		}
	}
	migrate(t, append(mig, "--to", "MachineAPI"))
	if got := runningInstances(t, cloud); !slices.Equal(got, kept) {
		t.Fatalf("after the handover back to the Machine API the running instances are %v, want %v", got, kept)
	}
}

// checkMAOPaused: machine-api-operator's Machine controller, not machina's, wrote each
// Machine's Paused condition (its message, not machina's).
func checkMAOPaused(t *testing.T, c client.Client, machines []machinev1beta1.Machine) {
	t.Helper()
	for _, m := range machines {
		cur := &machinev1beta1.Machine{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(&m), cur); err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(cur.Status.Conditions, func(c machinev1beta1.Condition) bool { return c.Type == "Paused" })
		if i < 0 || cur.Status.Conditions[i].Status != corev1.ConditionFalse ||
			cur.Status.Conditions[i].Message != "The AuthoritativeAPI status is set to 'MachineAPI'" {
			t.Errorf("Machine %s: conditions %+v, want Paused False with machine-api-operator's message", m.Name, cur.Status.Conditions)
		}
	}
}

// migrate runs `machina migrate` with args and fails the test unless it succeeds.
func migrate(t *testing.T, args []string) {
	t.Helper()
	out, errOut, code := runCommand(t, newMigrateCommand, args...)
	t.Logf("machina migrate %s:\n%s%s", strings.Join(args[1:], " "), out, errOut)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// runningInstances lists the cloud's running instances, sorted.
func runningInstances(t *testing.T, cloud *cloudclient.Client) []string {
	t.Helper()
	insts, err := cloud.DescribeInstances(context.Background(), api.DescribeInstancesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, i := range insts {
		if i.State == api.StateRunning {
			ids = append(ids, i.InstanceID)
		}
	}
	slices.Sort(ids)
	return ids
}

// scaleCAPI sets the Cluster API MachineSet's replicas.
func scaleCAPI(t *testing.T, c client.Client, ns, name string, replicas int32) {
	t.Helper()
	ms := &clusterv1.MachineSet{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, ms); err != nil {
		t.Fatal(err)
	}
	p := client.MergeFrom(ms.DeepCopy())
	ms.Spec.Replicas = ptr.To(replicas)
	if err := c.Patch(context.Background(), ms, p); err != nil {
		t.Fatalf("scaling Cluster API MachineSet %s to %d: %v", name, replicas, err)
	}
}

// waitCAPIRunning waits until the Cluster API MachineSet has n Machines, each Running with a
// Node, and no others.
func waitCAPIRunning(t *testing.T, c client.Client, ns, set string, n int) {
	t.Helper()
	poll(t, 4*time.Minute, fmt.Sprintf("%d Cluster API Machine(s) of %s Running with a Node", n, set), func(ctx context.Context) (bool, string, error) {
		var list clusterv1.MachineList
		if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineSetNameLabel: set}); err != nil {
			return false, err.Error(), nil
		}
		var seen []string
		ok := len(list.Items) == n
		for _, m := range list.Items {
			seen = append(seen, fmt.Sprintf("%s %s node %v", m.Name, m.Status.Phase, m.Status.NodeRef.IsDefined()))
			ok = ok && m.Status.Phase == string(clusterv1.MachinePhaseRunning) && m.Status.NodeRef.IsDefined()
		}
		return ok, strings.Join(seen, "; "), nil
	})
}
