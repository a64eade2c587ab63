package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/scheme"
)

// buildMachina compiles the machina binary for this test.
func buildMachina(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "machina-bin-")
		if err != nil {
			built.err = err
			return
		}
		built.dir, built.bin = dir, filepath.Join(dir, "machina")
		out, err := exec.Command("go", "build", "-o", built.bin, ".").CombinedOutput()
		if err != nil {
			built.err = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// built is the machina binary the package's tests run, linked once (about ten seconds of CPU
// each time) and removed by TestMain.
var built struct {
	once     sync.Once
	dir, bin string
	err      error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// upProcess runs `machina up` and collects its output lines.
type upProcess struct {
	cmd   *exec.Cmd
	lines chan string
	all   strings.Builder
	done  chan struct{}
}

func startUp(t *testing.T, bin, stateDir string) *upProcess {
	t.Helper()
	// Build the control plane first so the test's deadlines measure start and stop, not a
	// first-time compile.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if _, err := lab.EnsureBinaries(ctx, io.Discard); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "up", "--state-dir", stateDir)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	u := &upProcess{cmd: cmd, lines: make(chan string, 1000), done: make(chan struct{})}
	go func() {
		s := bufio.NewScanner(pr)
		for s.Scan() {
			u.all.WriteString(s.Text() + "\n")
			select {
			case u.lines <- s.Text():
			default:
			}
		}
	}()
	go func() { _ = cmd.Wait(); pw.Close(); close(u.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-u.done
	})
	return u
}

func (u *upProcess) waitFor(t *testing.T, substr string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l := <-u.lines:
			if strings.Contains(l, substr) {
				return l
			}
		case <-u.done:
			t.Fatalf("machina up exited before printing %q:\n%s", substr, u.all.String())
		case <-deadline:
			t.Fatalf("machina up did not print %q within %s:\n%s", substr, timeout, u.all.String())
		}
	}
}

func (u *upProcess) waitExit(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-u.done:
		return u.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("machina up still running %s after the signal:\n%s", timeout, u.all.String())
		return -1
	}
}

// processesMentioning lists live processes whose command line contains s (the state dir is
// unique per test, so these are exactly the lab's components).
func processesMentioning(s string) []string {
	var found []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.Contains(string(b), s) {
			continue
		}
		stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		if strings.Contains(string(stat), ") Z ") { // a zombie has already exited
			continue
		}
		found = append(found, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
	}
	return found
}

func expectNoLeftovers(t *testing.T, stateDir string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := processesMentioning(stateDir)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left behind:\n%s", strings.Join(left, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestUpServesKubeconfigAndStopsCleanlyOnSIGTERM(t *testing.T) {
	t.Parallel() // a lab of its own in its own state directory
	bin := buildMachina(t)
	stateDir := filepath.Join(t.TempDir(), "state")
	u := startUp(t, bin, stateDir)
	u.waitFor(t, "machina lab is up", 3*time.Minute)
	u.waitFor(t, "export KUBECONFIG="+filepath.Join(stateDir, "kubeconfig"), 5*time.Second)
	u.waitFor(t, "machina migrate --all --to ClusterAPI --dry-run", 5*time.Second)
	// The printed metrics endpoint serves machina's own metrics.
	line := u.waitFor(t, "Metrics: http://", 5*time.Second)
	metricsURL := strings.Fields(line[strings.Index(line, "Metrics: ")+len("Metrics: "):])[0]
	metricsDeadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(metricsURL)
		body := ""
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
		}
		if strings.Contains(body, `machina_machines{api="machine.openshift.io"`) && strings.Contains(body, "controller_runtime_reconcile_total") {
			break
		}
		if time.Now().After(metricsDeadline) {
			t.Fatalf("%s: no machina_machines for the demo's Machines (%v):\n%.2000s", metricsURL, err, body)
		}
		time.Sleep(500 * time.Millisecond)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(stateDir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	var machines machinev1beta1.MachineList
	if err := c.List(context.Background(), &machines); err != nil {
		t.Fatalf("listing Machines with the lab's kubeconfig: %v", err)
	}
	// The embedded cloud and controllers turn a Machine into a running instance and a Node.
	ps, _ := json.Marshal(&infrav1.SimMachineProviderSpec{
		TypeMeta: metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: "SimMachineProviderSpec"},
		Region:   "sim-east-1", Zone: "sim-east-1b", InstanceType: "s1.small", Image: "sim-rhcos-9"})
	m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "up-test", Namespace: "default"},
		Spec: machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: ps}}}}
	if err := c.Create(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(m), m); err != nil {
			t.Fatal(err)
		}
		if m.Status.Phase != nil && *m.Status.Phase == machinev1beta1.PhaseRunning && m.Status.NodeRef != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Machine not Running with a Node in the lab: phase %v conditions %+v", m.Status.Phase, m.Status.Conditions)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The demo's MachineSet moves to the Cluster API, as the README shows.
	mig := exec.Command(bin, "migrate", "machineset/lab-worker-a", "--to", "ClusterAPI", "--wait", "--timeout", "3m")
	mig.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(stateDir, "kubeconfig"))
	out, err := mig.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "machineset/lab-worker-a: done") {
		t.Fatalf("machina migrate: %v\n%s\n--- machina up ---\n%s", err, out, u.all.String())
	}
	t.Logf("machina migrate:\n%s", out)

	// describe shows both APIs side by side; the migrated MachineSet's Machines count as
	// ready in the Cluster API too.
	wants := []string{"Cluster lab", "MachineSet lab-worker-a  authority ClusterAPI  Synchronized  MAPI 2/2 ready  CAPI 2/2 ready",
		"MachineSet lab-worker-b  authority MachineAPI", "Machine lab-worker-b-", "MAPI Running", "Node i-"}
	descDeadline := time.Now().Add(60 * time.Second)
	for {
		desc := exec.Command(bin, "describe", "cluster/lab")
		desc.Env = mig.Env
		out, err = desc.CombinedOutput()
		missing := ""
		for _, want := range wants {
			if !strings.Contains(string(out), want) {
				missing = want
			}
		}
		if err == nil && missing == "" {
			break
		}
		if time.Now().After(descDeadline) {
			t.Fatalf("machina describe lacks %q (%v):\n%s", missing, err, out)
		}
		time.Sleep(time.Second)
	}
	if strings.Contains(string(out), "\x1b[") {
		t.Errorf("describe used colour although its output is piped:\n%s", out)
	}
	t.Logf("machina describe:\n%s", out)

	if n := len(processesMentioning(stateDir)); n < 3 {
		t.Fatalf("expected etcd, kube-apiserver and kube-controller-manager running, found %d", n)
	}

	if err := u.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := u.waitExit(t, 60*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM:\n%s", code, u.all.String())
	}
	expectNoLeftovers(t, stateDir)
}

func TestUpInterruptedDuringStartLeavesNothing(t *testing.T) {
	t.Parallel() // a lab of its own in its own state directory
	bin := buildMachina(t)
	stateDir := filepath.Join(t.TempDir(), "state")
	u := startUp(t, bin, stateDir)
	u.waitFor(t, "lab: etcd", 2*time.Minute) // etcd is up, kube-apiserver is starting
	if err := u.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := u.waitExit(t, 60*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGINT during start:\n%s", code, u.all.String())
	}
	expectNoLeftovers(t, stateDir)
}

func TestUpKilledLeavesNoOrphans(t *testing.T) {
	t.Parallel() // a lab of its own in its own state directory
	bin := buildMachina(t)
	stateDir := filepath.Join(t.TempDir(), "state")
	u := startUp(t, bin, stateDir)
	u.waitFor(t, "machina lab is up", 3*time.Minute)
	if err := u.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	u.waitExit(t, 10*time.Second)
	expectNoLeftovers(t, stateDir)
}
