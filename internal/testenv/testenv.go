// Package testenv starts what an integration test of machina's controllers needs, all real:
// a lab control plane (with kube-controller-manager), the simulated cloud with its kubelet
// registering Nodes in the lab, and a controller manager running chosen controller groups.
package testenv

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/machina-dev/machina/internal/cloud/api"
	cloudclient "github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/cloud/ec2"
	"github.com/machina-dev/machina/internal/cloud/kubelet"
	"github.com/machina-dev/machina/internal/cloud/server"
	"github.com/machina-dev/machina/internal/controllers"
	"github.com/machina-dev/machina/internal/controllers/aws"
	"github.com/machina-dev/machina/internal/controllers/sim"
	"github.com/machina-dev/machina/internal/demo"
	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/lab/labtest"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/provider"
	"github.com/machina-dev/machina/internal/upstream"
)

// Env is a running test environment.
type Env struct {
	T      testing.TB
	Lab    *lab.Lab
	Client client.Client // lab administrator
	Cloud  *cloudclient.Client
	Server *server.Server
	// EC2URL is the simulated cloud's EC2 front (Options.EC2; "" without it). Sign calls
	// with ec2.LabAccessKeyID and ec2.LabSecretAccessKey in region Server.EC2().Region();
	// classic and v2 ELB answer under EC2URL+ec2.PathELB and EC2URL+ec2.PathELBv2.
	EC2URL string
	// Upstream are the upstream controllers StartUpstream started (nil until then): the
	// Machine API and Cluster API sides are then machine-api-operator's and the upstream
	// Cluster API core's, not machina's.
	Upstream *upstream.Controllers

	groups []manager.Group
	resync time.Duration
	mgr    *running // shared by every view of the Env (see For)
}

type running struct {
	cancel context.CancelFunc
	done   chan error
}

// Options tune an Env.
type Options struct {
	// Groups are the controller groups to run ("" runs none).
	Groups string
	// Delays of the simulated cloud.
	Delays server.Delays
	// Resync of the controllers; default 2s so vanished instances are noticed quickly.
	Resync time.Duration
	// CatalogueFile extends the simulated cloud's catalogue (server.Options.CatalogueFile).
	CatalogueFile string
	// EC2 also serves the cloud's EC2 front and points the manager's AWS provider (group
	// "aws") at it with the lab key pair (the group's aws.Options); the process environment
	// is left alone.
	EC2 bool
	// ProviderCRDs are platforms whose InfraMachine, InfraMachineTemplate and InfraCluster
	// CRDs are installed from their Go modules before the manager starts (the controllers
	// watch only the kinds served when they start).
	ProviderCRDs []provider.Provider
}

// Start brings up the environment and registers its teardown.
func Start(t testing.TB, o Options) *Env {
	t.Helper()
	l := labtest.Start(t, labtest.WithControllerManager())
	setupLogging(t, filepath.Join(l.Dir, "logs", "manager.log"))
	InstallProviderCRDs(t, l, o.ProviderCRDs...)
	c, err := client.New(l.Config, client.Options{Scheme: registryScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	so := server.Options{
		StateDir: t.TempDir(), NoSync: true, Delays: o.Delays, KubeConfig: l.Config, Seed: 1,
		CatalogueFile: o.CatalogueFile,
		Kubelet: kubelet.Options{RenewInterval: lab.KubeletHeartbeatInterval, LeaseDuration: lab.NodeMonitorGracePeriod,
			PodStopTime: time.Second},
		Logger: logr.Discard(),
	}
	if o.EC2 {
		so.EC2 = &ec2.Options{Logger: logr.Discard()}
	}
	srv, err := server.New(so)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	cloud, err := cloudclient.New(srv.URL(), cloudclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	settings := &controllers.Settings{Sim: sim.Options{CloudURL: srv.URL()}}
	if ec2srv := srv.EC2(); ec2srv != nil {
		u := ec2srv.URL()
		settings.AWS = aws.Options{Endpoint: u, ELBEndpoint: u + ec2.PathELB, ELBv2Endpoint: u + ec2.PathELBv2,
			Credentials: credentials.NewStaticCredentialsProvider(ec2.LabAccessKeyID, ec2.LabSecretAccessKey, "")}
	}
	groups, err := controllers.Select(settings, o.Groups)
	if err != nil {
		t.Fatal(err)
	}
	if o.Resync == 0 {
		o.Resync = 2 * time.Second
	}
	e := &Env{T: t, Lab: l, Client: c, Cloud: cloud, Server: srv, groups: groups, resync: o.Resync, mgr: &running{}}
	if srv.EC2() != nil {
		e.EC2URL = srv.EC2().URL()
	}
	e.StartManager()
	t.Cleanup(e.StopManager)
	return e
}

// For returns a view of the environment that reports failures to t (a subtest).
func (e *Env) For(t testing.TB) *Env {
	c := *e
	c.T = t
	return &c
}

// StartManager starts the controller manager (again, after StopManager).
func (e *Env) StartManager() {
	e.T.Helper()
	cfg, err := e.Lab.ManagerConfig()
	if err != nil {
		e.T.Fatal(err)
	}
	env := manager.Env{Resync: e.resync}
	mgr, err := manager.New(cfg, manager.Options{MetricsAddr: "0", HealthProbeAddr: "0", Groups: e.groups, Env: env})
	if err != nil {
		e.T.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	e.mgr.cancel, e.mgr.done = cancel, done
	go func() { done <- mgr.Start(ctx) }()
}

// StopManager stops the controller manager, as a crash would: whatever reconcile is in
// flight is abandoned (its context is cancelled).
func (e *Env) StopManager() {
	if e.mgr.cancel == nil {
		return
	}
	e.mgr.cancel()
	select {
	case err := <-e.mgr.done:
		if err != nil && !errors.Is(err, context.Canceled) {
			e.T.Errorf("manager: %v", err)
		}
	case <-time.After(30 * time.Second):
		e.T.Errorf("manager did not stop within 30s")
	}
	e.mgr.cancel = nil
}

// Eventually polls cond every 100ms until it returns true, failing the test with the last
// description cond gave when timeout passes.
func (e *Env) Eventually(timeout time.Duration, what string, cond func(ctx context.Context) (bool, string, error)) {
	e.T.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true,
		func(context.Context) (bool, error) {
			// Each check gets its own deadline, so the last one still says what it saw.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ok, desc, err := cond(ctx)
			last = desc
			return ok, err
		})
	if err != nil {
		e.T.Fatalf("%s: not within %s: %v (last seen: %s)", what, timeout, err, last)
	}
}

var logOnce sync.Once

// setupLogging sends controller logs to a file next to the lab's component logs (printed
// path on failure), or to stderr when MACHINA_TEST_LOG is set.
func setupLogging(t testing.TB, path string) {
	logOnce.Do(func() {
		var w io.Writer = os.Stderr
		if os.Getenv("MACHINA_TEST_LOG") == "" {
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			w = f
		}
		logger := zap.New(zap.WriteTo(w), zap.UseDevMode(false))
		ctrl.SetLogger(logger)
		klog.SetLogger(logger)
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("controller logs: %s", path)
		}
	})
}

// InstancesTagged lists cloud instances (any state) carrying the tag.
func (e *Env) InstancesTagged(key, value string) []api.Instance {
	e.T.Helper()
	list, err := e.Cloud.DescribeInstances(context.Background(), api.DescribeInstancesRequest{Tags: map[string]string{key: value}})
	if err != nil {
		e.T.Fatal(err)
	}
	return list
}

// Logf is a convenience for progress messages.
func (e *Env) Logf(format string, args ...any) { e.T.Logf(format, args...) }

// SeedCluster creates the lab cluster the sync and migration controllers convert against
// (see internal/demo): namespaces, Infrastructure, Cluster + SimCluster, kubeconfig and user
// data Secrets.
func (e *Env) SeedCluster(name string) demo.Cluster {
	e.T.Helper()
	kc, err := os.ReadFile(e.Lab.KubeconfigPath)
	if err != nil {
		e.T.Fatal(err)
	}
	mapiNS, capiNS := manager.Env{}.Namespaces()
	cl := demo.Cluster{Name: name, Region: "sim-east-1", MachineAPINamespace: mapiNS, ClusterAPINamespace: capiNS, Kubeconfig: kc}
	if err := demo.EnsureCluster(context.Background(), e.Client, cl); err != nil {
		e.T.Fatal(err)
	}
	return cl
}

// ManagerClient is a client with machina's own identity (the lab's ManagerUser and only the
// generated roles), for tests that act as the controllers would.
func (e *Env) ManagerClient() client.Client {
	e.T.Helper()
	cfg, err := e.Lab.ManagerConfig()
	if err != nil {
		e.T.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: registryScheme(e.T)})
	if err != nil {
		e.T.Fatal(err)
	}
	return c
}

// registryScheme is the scheme of every built-in platform's types, as the manager has it.
func registryScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s, err := provider.Builtin().Scheme()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
