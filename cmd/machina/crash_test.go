package main_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/demo"
	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/testenv"
)

// crashLoops is how many times the manager is killed; MACHINA_CRASH_LOOPS raises it for a
// longer run.
func crashLoops() int {
	if n, err := strconv.Atoi(os.Getenv("MACHINA_CRASH_LOOPS")); err == nil && n > 0 {
		return n
	}
	return 20
}

// TestManagerKilledAtRandomConverges SIGKILLs `machina manager` at random moments while a
// 20-Machine MachineSet is created, moved to the Cluster API, scaled there and moved back,
// restarting it each time. At the end no instance was launched twice for one Machine, no
// instance leaked, nothing is stuck, and both APIs agree.
func TestManagerKilledAtRandomConverges(t *testing.T) {
	bin := buildMachina(t)
	e := testenv.Start(t, testenv.Options{}) // lab and cloud; the manager runs as a process below
	cl := e.SeedCluster("lab")
	cfg, err := e.Lab.ManagerConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "manager.kubeconfig")
	if err := lab.WriteKubeconfig(kubeconfig, cfg, "lab"); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	t.Cleanup(func() { explainFailure(t, bin, kubeconfig, logPath) })
	var mgr *exec.Cmd
	start := func() {
		mgr = exec.Command(bin, "manager", "--kubeconfig", kubeconfig, "--cloud-url", e.Server.URL(),
			"--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0",
			"--controllers=machineapi,clusterapi,sim,sync,migration")
		mgr.Stdout, mgr.Stderr = logFile, logFile
		mgr.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := mgr.Start(); err != nil {
			t.Fatal(err)
		}
	}
	kill := func() {
		_ = mgr.Process.Signal(syscall.SIGKILL)
		_ = mgr.Wait()
	}
	start()
	t.Cleanup(func() { kill() })

	ctx := context.Background()
	ms := demoMachineSet(cl, "crashy", 20)
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	// The scenario's steps, each taken after a few kills.
	steps := []func() error{
		func() error { return setAuthority(ctx, e.Client, "crashy", machinev1beta1.MachineAuthorityClusterAPI) },
		func() error { return scaleCAPI(ctx, e.Client, "crashy", 24) },
		func() error { return setAuthority(ctx, e.Client, "crashy", machinev1beta1.MachineAuthorityMachineAPI) },
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	loops := crashLoops()
	stepAt := map[int]func() error{}
	for k, st := range steps {
		stepAt[(k+1)*loops/(len(steps)+1)] = st
	}
	for i := 0; i < loops; i++ {
		time.Sleep(time.Duration(200+rng.IntN(1800)) * time.Millisecond)
		kill()
		start()
		if st, ok := stepAt[i]; ok {
			if err := st(); err != nil {
				t.Fatalf("scenario step after kill %d: %v", i, err)
			}
		}
	}

	// Converge: MachineAPI-authoritative, 24 Machines running in both APIs.
	e.Eventually(5*time.Minute, "convergence after the kills", func(ctx context.Context) (bool, string, error) {
		var mm machinev1beta1.MachineList
		var cm clusterv1.MachineList
		sel := client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": "crashy"}
		if err := e.Client.List(ctx, &mm, client.InNamespace(cl.MachineAPINamespace), sel); err != nil {
			return false, err.Error(), nil
		}
		if err := e.Client.List(ctx, &cm, client.InNamespace(cl.ClusterAPINamespace), sel); err != nil {
			return false, err.Error(), nil
		}
		set := &machinev1beta1.MachineSet{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: cl.MachineAPINamespace, Name: "crashy"}, set); err != nil {
			return false, err.Error(), nil
		}
		running := 0
		for _, m := range mm.Items {
			if m.DeletionTimestamp.IsZero() && ptr.Deref(m.Status.Phase, "") == "Running" {
				running++
			}
		}
		alive, err := e.Cloud.DescribeInstances(ctx, api.DescribeInstancesRequest{States: []api.InstanceState{api.StatePending, api.StateRunning}})
		if err != nil {
			return false, err.Error(), nil
		}
		ok := set.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityMachineAPI && len(mm.Items) == 24 &&
			len(cm.Items) == 24 && running == 24 && len(alive) == 24
		return ok, fmt.Sprintf("authority %s, %d/%d Machine API Machines running, %d Cluster API Machines, %d live instances",
			set.Status.AuthoritativeAPI, running, len(mm.Items), len(cm.Items), len(alive)), nil
	})

	// Exactly one instance per Machine: every live instance belongs to a distinct Machine,
	// and each Machine's provider ID names a live instance.
	alive, err := e.Cloud.DescribeInstances(ctx, api.DescribeInstancesRequest{States: []api.InstanceState{api.StatePending, api.StateRunning}})
	if err != nil {
		t.Fatal(err)
	}
	byProvider := map[string]bool{}
	for _, inst := range alive {
		byProvider[inst.ProviderID] = true
	}
	var mm machinev1beta1.MachineList
	if err := e.Client.List(ctx, &mm, client.InNamespace(cl.MachineAPINamespace)); err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, m := range mm.Items {
		pid := ptr.Deref(m.Spec.ProviderID, "")
		if !byProvider[pid] {
			t.Errorf("Machine %s names %q, which is not a live instance", m.Name, pid)
		}
		if other, dup := seen[pid]; dup {
			t.Errorf("Machines %s and %s share instance %s", m.Name, other, pid)
		}
		seen[pid] = m.Name
	}
	t.Logf("%d kills; %d instances created in all for 24 Machines (scaling from 20 to 24)", loops, mustStats(t, e).InstancesCreated)
	if created := mustStats(t, e).InstancesCreated; created != 24 {
		t.Errorf("%d instances were created for 24 Machines that never failed: some were launched twice", created)
	}
}

func mustStats(t *testing.T, e *testenv.Env) *api.Stats {
	s, err := e.Cloud.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func demoMachineSet(cl demo.Cluster, name string, replicas int32) *machinev1beta1.MachineSet {
	labels := map[string]string{"machine.openshift.io/cluster-api-cluster": cl.Name, "machine.openshift.io/cluster-api-machineset": name}
	raw := fmt.Sprintf(`{"apiVersion":"infrastructure.machina.dev/v1alpha1","kind":"SimMachineProviderSpec","region":%q,"zone":%q,"instanceType":"s1.small","image":"sim-rhcos-9","userDataSecret":{"name":%q}}`,
		cl.Region, cl.Region+"a", demo.UserDataSecret)
	ms := &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cl.MachineAPINamespace,
		Labels: map[string]string{"machine.openshift.io/cluster-api-cluster": cl.Name}},
		Spec: machinev1beta1.MachineSetSpec{Replicas: ptr.To(replicas), Selector: metav1.LabelSelector{MatchLabels: labels},
			Template: machinev1beta1.MachineTemplateSpec{ObjectMeta: machinev1beta1.ObjectMeta{Labels: labels}}}}
	ms.Spec.Template.Spec.ProviderSpec.Value = rawExt(raw)
	return ms
}

func setAuthority(ctx context.Context, c client.Client, name string, to machinev1beta1.MachineAuthority) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ms := &machinev1beta1.MachineSet{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "openshift-machine-api", Name: name}, ms); err != nil {
			return err
		}
		ms.Spec.AuthoritativeAPI = to
		return c.Update(ctx, ms)
	})
}

func scaleCAPI(ctx context.Context, c client.Client, name string, n int32) error {
	// Scaling in the Cluster API needs it to be authoritative for the MachineSet first.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ms := &machinev1beta1.MachineSet{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "openshift-machine-api", Name: name}, ms); err != nil {
			return err
		}
		if ms.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityClusterAPI {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("MachineSet %s never became Cluster API-authoritative (status %q)", name, ms.Status.AuthoritativeAPI)
		}
		time.Sleep(200 * time.Millisecond)
	}
	capi := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: "openshift-cluster-api", Name: name}}
	for {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			s := &autoscalingv1.Scale{}
			if err := c.SubResource("scale").Get(ctx, capi, s); err != nil {
				return err
			}
			s.Spec.Replicas = n
			return c.SubResource("scale").Update(ctx, capi, client.WithSubResourceBody(s))
		})
		// A MachineSet the sync first saw after the request was made starts out in the
		// Cluster API (its authority follows the spec) and its copy there is created next.
		if !apierrors.IsNotFound(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// explainFailure puts into a failed test's output what its temporary directory takes away
// with it: both APIs side by side (`machina describe`) and the end of the manager's log.
func explainFailure(t *testing.T, bin, kubeconfig, logPath string) {
	if !t.Failed() {
		return
	}
	out, err := exec.Command(bin, "describe", "--kubeconfig", kubeconfig, "--color=never").CombinedOutput()
	t.Logf("machina describe (%v):\n%s", err, out)
	b, _ := os.ReadFile(logPath)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	t.Logf("last lines of the manager log:\n%s", strings.Join(lines[max(0, len(lines)-80):], "\n"))
}
