package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/cloud/ec2"
	"github.com/machina-dev/machina/internal/cloud/kubelet"
	"github.com/machina-dev/machina/internal/cloud/server"
	"github.com/machina-dev/machina/internal/demo"
	"github.com/machina-dev/machina/internal/flock"
	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/scheme"
)

type upFlags struct {
	stateDir     string
	fresh        bool
	controllers  string
	cloudListen  string
	pendingDelay time.Duration
	noDemo       bool
	clusterName  string
}

func defaultStateDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ".machina"
	}
	return filepath.Join(d, "machina", "up")
}

func newUpCommand() *cobra.Command {
	f := &upFlags{}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a complete machina lab on this machine",
		Long: `Start a complete lab on this machine and keep it running until Ctrl-C:

  - a real etcd, kube-apiserver and kube-controller-manager (garbage collection,
    PodDisruptionBudgets, node lifecycle, namespaces),
  - every CRD machina serves: Machine API, Cluster API, config.openshift.io and the
    simulated provider's kinds,
  - the simulated cloud, whose instances register as Nodes in the lab,
  - machina's controllers (all groups unless --controllers says otherwise); their logs go
    to logs/manager.log in the state directory.

The first run builds the control-plane binaries from source (about 5-6 minutes on 2 cores);
they are cached by version and later starts take a few seconds.

Everything the lab stores lives in --state-dir, so stopping and starting again keeps your
objects; --fresh starts from an empty lab. A file named kubeconfig in the state directory
lets kubectl (or any client) reach the lab.`,
		Example: `  machina up
  # in another terminal:
  export KUBECONFIG=~/.cache/machina/up/kubeconfig
  kubectl get machines.machine.openshift.io -A`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runUp(cmd.Context(), f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&f.stateDir, "state-dir", defaultStateDir(), "directory for the lab's data, logs and kubeconfig")
	cmd.Flags().BoolVar(&f.fresh, "fresh", false, "delete the lab's previous data before starting")
	cmd.Flags().StringVar(&f.controllers, "controllers", "*", "controller groups to run (see machina manager --help); empty runs none")
	cmd.Flags().StringVar(&f.cloudListen, "cloud-listen", "127.0.0.1:0", "loopback address of the simulated cloud's API")
	cmd.Flags().DurationVar(&f.pendingDelay, "pending-delay", 2*time.Second, "how long a new cloud instance stays pending before it runs")
	cmd.Flags().BoolVar(&f.noDemo, "no-demo", false, "start an empty lab: no cluster objects, MachineSets or MachineHealthCheck")
	cmd.Flags().StringVar(&f.clusterName, "cluster-name", "lab", "name of the demo cluster (Infrastructure, Cluster, SimCluster)")
	return cmd
}

func runUp(ctx context.Context, f *upFlags, out, progress io.Writer) error {
	ctx, stop := signalContext(ctx)
	defer stop()
	dir, err := filepath.Abs(f.stateDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return &ExitError{Code: 2, Err: fmt.Errorf("--state-dir: %w", err)}
	}
	unlock, err := lockStateDir(dir)
	if err != nil {
		return err
	}
	defer unlock()
	if f.fresh {
		for _, sub := range []string{"etcd", "logs", "pki", "kubeconfig", "cloud"} {
			if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
				return err
			}
		}
	}

	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o700); err != nil {
		return err
	}
	logFile, err := os.OpenFile(filepath.Join(dir, "logs", "manager.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	setupLoggingTo(logFile, verbosity)

	groups, err := selectGroups(f.controllers)
	if err != nil {
		return err
	}
	fmt.Fprintf(progress, "machina up: starting the lab in %s\n", dir)
	l, err := lab.Start(ctx, lab.Options{Dir: dir, ControllerManager: true, Progress: progress})
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(progress, "machina up: interrupted while starting; everything started so far is stopped")
			return nil
		}
		return err
	}
	defer func() {
		fmt.Fprintln(progress, "machina up: shutting down")
		l.Stop()
		fmt.Fprintln(progress, "machina up: stopped")
	}()

	cloud, err := startLabCloud(ctx, dir, f, l)
	if err != nil {
		return err
	}
	defer cloud.Close()
	fmt.Fprintf(progress, "machina up: simulated cloud serving at %s\n", cloud.URL())
	fmt.Fprintf(progress, "machina up: EC2 endpoint at %s; for AWS clients:\n%s\n", cloud.EC2().URL(), cloud.EC2().ExportLine())

	mgrErr, metricsAddr, err := startLabManager(ctx, dir, l, groups, cloud.URL())
	if err != nil {
		return err
	}
	fmt.Fprintf(progress, "machina up: %d controller group(s) running: %s\n", len(groups), groupNames(groups))
	next := "kubectl get machines.machine.openshift.io -A"
	if !f.noDemo {
		if err := seedDemo(ctx, l, f.clusterName); err != nil {
			return fmt.Errorf("seeding the demo: %w", err)
		}
		fmt.Fprintf(progress, "machina up: demo seeded: cluster %q, MachineSets %s in %s, MachineHealthCheck lab-workers\n",
			f.clusterName, strings.Join(demo.MachineSetNames, ", "), manager.DefaultMachineAPINamespace)
		next = `kubectl get machinesets.machine.openshift.io,machines.machine.openshift.io -n openshift-machine-api
  machina plan
  machina migrate machineset/` + demo.MachineSetNames[0] + ` --to ClusterAPI --wait
  machina describe
  kubectl get machinesets.cluster.x-k8s.io,machines.cluster.x-k8s.io -n openshift-cluster-api`
	}

	fmt.Fprintf(out, `
machina lab is up. In another terminal:

  export KUBECONFIG=%s
  %s

Simulated cloud: %s   Metrics: http://%s/metrics   Press Ctrl-C to stop.
Data is kept in %s (logs in %s).
`, l.KubeconfigPath, next, cloud.URL(), metricsAddr, dir, filepath.Join(dir, "logs"))

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			<-mgrErr //nolint:errcheck // the manager logs its own shutdown error; stopping is not a failure
			return nil
		case err := <-mgrErr:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("the controllers stopped: %w", err)
		case <-tick.C:
			if err := l.Failed(); err != nil {
				return fmt.Errorf("the lab failed: %w", err)
			}
		}
	}
}

// startLabCloud runs the simulated cloud embedded, its kubelet registering Nodes in the lab
// with the lab's heartbeat timing.
func startLabCloud(ctx context.Context, dir string, f *upFlags, l *lab.Lab) (*server.Server, error) {
	srv, err := server.New(server.Options{
		StateDir: filepath.Join(dir, "cloud"), Addr: f.cloudListen, KubeConfig: l.Config,
		Delays: server.Delays{Pending: f.pendingDelay, ShuttingDown: f.pendingDelay},
		Kubelet: kubelet.Options{RenewInterval: lab.KubeletHeartbeatInterval, LeaseDuration: lab.NodeMonitorGracePeriod,
			PodStopTime: 2 * time.Second},
		Logger: ctrl.Log.WithName("cloud"),
		EC2:    &ec2.Options{},
	})
	if err != nil {
		return nil, err
	}
	if err := srv.Start(ctx); err != nil {
		return nil, fmt.Errorf("starting the simulated cloud: %w", err)
	}
	return srv, nil
}

// startLabManager runs the controllers in this process; the returned channel yields
// the manager's result when it stops, and the address of its metrics endpoint.
func startLabManager(ctx context.Context, dir string, l *lab.Lab, groups []manager.Group, cloudURL string) (<-chan error, string, error) {
	cfg, err := l.ManagerConfig()
	if err != nil {
		return nil, "", err
	}
	metricsAddr := "127.0.0.1:0"
	if ln, err := net.Listen("tcp", "127.0.0.1:0"); err == nil { // a free port to print
		metricsAddr = ln.Addr().String()
		_ = ln.Close()
	}
	// The lab's metrics stay on loopback, over plain HTTP, for anyone on this machine.
	mgr, err := manager.New(cfg, manager.Options{MetricsAddr: metricsAddr, MetricsInsecure: true, HealthProbeAddr: "0",
		Groups: groups, Env: manager.Env{CloudURL: cloudURL}})
	if err != nil {
		return nil, "", fmt.Errorf("controllers: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return done, metricsAddr, nil
}

// seedDemo creates the demo cluster and its Machine API workload (idempotent: a persistent
// lab keeps what it had).
func seedDemo(ctx context.Context, l *lab.Lab, name string) error {
	c, err := client.New(l.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return err
	}
	kc, err := os.ReadFile(l.KubeconfigPath)
	if err != nil {
		return err
	}
	mapiNS, capiNS := manager.Env{}.Namespaces()
	cl := demo.Cluster{Name: name, Region: "sim-east-1", MachineAPINamespace: mapiNS, ClusterAPINamespace: capiNS, Kubeconfig: kc}
	if err := demo.EnsureCluster(ctx, c, cl); err != nil {
		return err
	}
	return demo.EnsureWorkload(ctx, c, cl)
}

func groupNames(gs []manager.Group) string {
	names := make([]string, len(gs))
	for i, g := range gs {
		names[i] = g.Name
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// lockStateDir refuses a second `machina up` on the same state directory.
func lockStateDir(dir string) (func(), error) {
	unlock, err := flock.TryLock(filepath.Join(dir, "up.lock"))
	if errors.Is(err, flock.ErrLocked) {
		return nil, &ExitError{Code: 2, Err: fmt.Errorf("another machina up is already using %s (stop it, or pick another --state-dir)", dir)}
	}
	return unlock, err
}
