package manager_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/go-logr/logr/funcr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/lab/labtest"
	mmgr "github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/opsmetrics"
)

var started = make(chan string, 10)

// testGroups are two groups that only report that they started, and the operator metrics.
func testGroups() []mmgr.Group {
	var gs []mmgr.Group
	for _, name := range []string{"alpha", "beta"} {
		gs = append(gs, mmgr.Group{Name: name, Description: "test group " + name,
			Setup: func(mgr ctrl.Manager, _ mmgr.Env) error {
				return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
					started <- name
					<-ctx.Done()
					return nil
				}))
			}})
	}
	return append(gs, opsmetrics.Group())
}

func names(gs []mmgr.Group) string {
	var n []string
	for _, g := range gs {
		n = append(n, g.Name)
	}
	return strings.Join(n, ",")
}

func TestSelect(t *testing.T) {
	// opsmetrics always runs.
	for spec, want := range map[string]string{"*": "alpha,beta,opsmetrics", "beta": "beta,opsmetrics", "*,-alpha": "beta,opsmetrics",
		"": "opsmetrics", "alpha, beta": "alpha,beta,opsmetrics", "opsmetrics": "opsmetrics"} {
		got, err := mmgr.Select(testGroups(), spec)
		if err != nil {
			t.Fatalf("%q: %v", spec, err)
		}
		if names(got) != want {
			t.Errorf("Select(%q) = %s, want %s", spec, names(got), want)
		}
	}
	_, err := mmgr.Select(testGroups(), "alpha,gamma")
	if err == nil || !strings.Contains(err.Error(), `"gamma"`) || !strings.Contains(err.Error(), "alpha, beta") {
		t.Fatalf("unknown group error should name it and the known groups: %v", err)
	}
	if _, err := mmgr.Select(testGroups(), "*,-opsmetrics"); err == nil || !strings.Contains(err.Error(), "always runs") {
		t.Fatalf("leaving out a group that always runs: %v", err)
	}
}

// The manager package knows groups only as values: it imports no controller package (nor
// the operator metrics, which read the sync's conditions), and no cloud's SDK: a setting only
// one group reads is that group's own (Group.AddFlags).
func TestManagerImportsNoController(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "github.com/machina-dev/machina/internal/manager").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/machina-dev/machina/internal/scheme") {
		t.Fatalf("go list -deps lists no internal/scheme; the check below would prove nothing: %v", deps)
	}
	for _, d := range deps {
		rel, ours := strings.CutPrefix(d, "github.com/machina-dev/machina/internal/")
		if ours && (strings.HasPrefix(rel, "controllers") || rel == "authorityhook" || rel == "opsmetrics") {
			t.Errorf("internal/manager depends on %s", d)
		}
	}
	out, err = exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "github.com/machina-dev/machina/internal/manager").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, imp := range strings.Fields(string(out)) {
		if strings.Contains(imp, "/aws-sdk-go") {
			t.Errorf("internal/manager imports %s", imp)
		}
	}
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func get(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// The manager runs the selected groups only, wins a leader-election Lease and serves
// health, readiness and metrics.
func TestManagerAgainstLab(t *testing.T) {
	l := labtest.Start(t)
	c, err := client.New(l.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "machina-system"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	groups, err := mmgr.Select(testGroups(), "beta")
	if err != nil {
		t.Fatal(err)
	}
	metrics, probes := freeAddr(t), freeAddr(t)
	mgr, err := mmgr.New(l.Config, mmgr.Options{MetricsAddr: metrics, MetricsInsecure: true, HealthProbeAddr: probes,
		LeaderElection: true, LeaderElectionNamespace: "machina-system", LeaderElectionID: "machina-test", Groups: groups})
	if err != nil {
		t.Fatal(err)
	}
	assertWarningsLoggedOnce(ctx, t, mgr.GetClient())
	errc := make(chan error, 1)
	go func() { errc <- mgr.Start(ctx) }()

	select {
	case name := <-started:
		if name != "beta" {
			t.Fatalf("group %s ran but only beta was selected", name)
		}
	case err := <-errc:
		t.Fatalf("manager stopped: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("selected group never started (leader election not won?)")
	}
	var lease coordinationv1.Lease
	if err := c.Get(ctx, client.ObjectKey{Namespace: "machina-system", Name: "machina-test"}, &lease); err != nil {
		t.Fatalf("leader-election Lease: %v", err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Fatal("leader-election Lease has no holder")
	}
	for _, probe := range []struct{ url, want string }{
		{"http://" + probes + "/healthz", "ok"},
		{"http://" + probes + "/readyz", "ok"},
		{"http://" + metrics + "/metrics", "controller_runtime_"},
		{"http://" + metrics + "/metrics", `machina_migrations_pending{kind="MachineSet"} 0`},
		{"http://" + metrics + "/metrics", `machina_opsmetrics_list_errors{kind="cluster.x-k8s.io/Machine"} 0`},
	} {
		deadline := time.Now().Add(20 * time.Second)
		for {
			code, body, err := get(probe.url)
			if err == nil && code == 200 && strings.Contains(body, probe.want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d %v %.200s", probe.url, code, err, body)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	select {
	case name := <-started:
		t.Fatalf("group %s started although not selected", name)
	default:
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("manager exit: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("manager did not stop")
	}
}

// assertWarningsLoggedOnce creates three objects whose finalizer has no "/" through the
// manager's client: the API server warns on each write that sets such a finalizer, the manager
// logs the warning once.
func assertWarningsLoggedOnce(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	var logged []string
	ctx = ctrllog.IntoContext(ctx, funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{}))
	var created []*infrav1.SimCluster
	for i := range 3 {
		sc := &infrav1.SimCluster{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("warned-%d", i), Namespace: "default",
			Finalizers: []string{"unqualified.example.com"}}, Spec: infrav1.SimClusterSpec{Region: "sim-east-1"}}
		if err := c.Create(ctx, sc); err != nil {
			t.Fatal(err)
		}
		created = append(created, sc)
	}
	warned := 0
	for _, l := range logged {
		if strings.Contains(l, "unqualified.example.com") {
			warned++
		}
	}
	if warned != 1 {
		t.Fatalf("the finalizer warning of 3 writes was logged %d times, want once: %q", warned, logged)
	}
	for _, sc := range created {
		sc.Finalizers = nil
		if err := c.Update(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
}
