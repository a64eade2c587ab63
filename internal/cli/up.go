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

	"github.com/machina-dev/machina/internal/cloud/ec2"
	"github.com/machina-dev/machina/internal/cloud/kubelet"
	"github.com/machina-dev/machina/internal/cloud/server"
	"github.com/machina-dev/machina/internal/controllers"
	"github.com/machina-dev/machina/internal/controllers/aws"
	"github.com/machina-dev/machina/internal/flock"
	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/upstream"
)

type upFlags struct {
	stateDir     string
	fresh        bool
	controllers  string
	cloudListen  string
	pendingDelay time.Duration
	noDemo       bool
	clusterName  string
	platform     string
	ec2Listen    string
	capa         bool
	upstream     bool
	// startCAPA starts CAPA; nil is (*lab.Lab).StartCAPA (tests replace it).
	startCAPA startCAPAFunc
	// changed reports whether a flag was given on the command line.
	changed func(name string) bool
}

func defaultStateDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ".machina"
	}
	return filepath.Join(d, "machina", "up")
}

func newUpCommand() *cobra.Command { return newUpCommandWith(&upFlags{}) }

// newUpCommandWith is the up command storing its flags in f.
func newUpCommandWith(f *upFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a complete machina lab on this machine",
		Long: `Start a complete lab on this machine and keep it running until Ctrl-C:

  - a real etcd, kube-apiserver and kube-controller-manager (garbage collection,
    PodDisruptionBudgets, node lifecycle, namespaces),
  - every CRD machina serves: Machine API, Cluster API, config.openshift.io and the
    simulated provider's kinds,
  - the simulated cloud, whose instances register as Nodes in the lab, with its EC2 front
    (the EC2 Query API with SigV4, for aws-sdk-go-v2 and the aws CLI),
  - machina's controllers (all groups unless --controllers says otherwise); their logs go
    to logs/manager.log in the state directory,
  - a demo cluster for --platform: "sim" (the default) seeds a cluster on the simulated
    provider; "aws" seeds an OpenShift-style cluster on the EC2 front (Infrastructure with
    platform AWS, worker user data, credentials Secret, two AWS MachineSets in two zones)
    whose Machines the Machine API AWS actuator launches through the EC2 API,
  - with --platform aws, the upstream Cluster API Provider AWS controller (CAPA) next to
    machina's, talking to the EC2 front, for the Cluster API side of a migration; its log
    is logs/capa.log. Its first start builds it from source (about 10 minutes on 2 cores);
    --capa=false skips it.
  - with --platform aws --upstream, the controllers OpenShift users run instead of
    machina's own Machine API and Cluster API controllers: machine-api-operator's
    MachineSet, MachineHealthCheck, NodeLink and Machine controllers (the last with
    machina's EC2 actuator), MachineAPIMigration on, and the upstream Cluster API core,
    beside CAPA; machina then runs only what cluster-capi-operator's migration does (sync,
    migration, the authority webhook, metrics). Logs: logs/mao-*.log, logs/capi-core.log.

The first run builds the control-plane binaries from source (about 5-6 minutes on 2 cores);
they are cached by version and later starts take a few seconds.

Everything the lab stores lives in --state-dir, so stopping and starting again keeps your
objects; --fresh starts from an empty lab. A file named kubeconfig in the state directory
lets kubectl (or any client) reach the lab.`,
		Example: `  machina up
  machina up --platform aws --state-dir ~/.cache/machina/up-aws
  machina up --platform aws --upstream --state-dir ~/.cache/machina/up-upstream
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
	cmd.Flags().StringVar(&f.controllers, "controllers", "*", `controller groups to run (see machina manager --help); empty runs none; with --platform aws the default leaves out "sim"`)
	cmd.Flags().StringVar(&f.cloudListen, "cloud-listen", "127.0.0.1:0", "loopback address of the simulated cloud's API")
	cmd.Flags().DurationVar(&f.pendingDelay, "pending-delay", 2*time.Second, "how long a new cloud instance stays pending before it runs")
	cmd.Flags().BoolVar(&f.noDemo, "no-demo", false, "start an empty lab: no cluster objects, MachineSets or MachineHealthCheck")
	cmd.Flags().StringVar(&f.clusterName, "cluster-name", "lab", "name of the demo cluster (Infrastructure, Cluster, SimCluster); --platform sim only")
	cmd.Flags().StringVar(&f.platform, "platform", "sim", "infrastructure platform of the demo cluster: "+strings.Join(upPlatformNames(), " or "))
	cmd.Flags().BoolVar(&f.capa, "capa", true, capaFlagHelp)
	cmd.Flags().BoolVar(&f.upstream, "upstream", false, upstreamFlagHelp)
	cmd.Flags().StringVar(&f.ec2Listen, "ec2-listen", "127.0.0.1:0", "loopback address of the simulated cloud's EC2 front")
	f.changed = cmd.Flags().Changed
	return cmd
}

func runUp(ctx context.Context, f *upFlags, out, progress io.Writer) error {
	ctx, stop := signalContext(ctx)
	defer stop()
	plat, err := f.platformOf()
	if err != nil {
		return err
	}
	if _, err := f.capaFor(plat); err != nil {
		return err
	}
	if err := f.checkUpstream(plat); err != nil {
		return err
	}
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

	fmt.Fprintf(progress, "machina up: starting the lab in %s\n", dir)
	u, err := startUpLab(ctx, dir, f, progress)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(progress, "machina up: interrupted while starting; everything started so far is stopped")
			return nil
		}
		return err
	}
	defer func() {
		fmt.Fprintln(progress, "machina up: shutting down")
		u.stop()
		fmt.Fprintln(progress, "machina up: stopped")
	}()

	fmt.Fprint(out, u.banner(dir))
	return u.wait(ctx)
}

// banner is what `up` prints once everything runs: how to reach the lab and its endpoints.
func (u *upLab) banner(dir string) string {
	capa := ""
	if u.capa != nil {
		capa = fmt.Sprintf("CAPA controller: health %s   log %s\n", u.capa.HealthURL, u.capa.LogPath)
	}
	return fmt.Sprintf(`
machina lab is up. In another terminal:

  export KUBECONFIG=%s
  %s

Simulated cloud: %s   EC2 endpoint: %s   Metrics: http://%s/metrics   Press Ctrl-C to stop.
%sData is kept in %s (logs in %s).
`, u.lab.KubeconfigPath, u.next, u.cloud.URL(), u.cloud.EC2().URL(), u.metricsAddr, capa, dir, filepath.Join(dir, "logs"))
}

// upLab is what `machina up` runs: the control plane, the simulated cloud with its EC2
// front, the controllers in this process and the seeded cluster.
type upLab struct {
	lab   *lab.Lab
	cloud *server.Server
	// capa is the upstream CAPA controller, nil when it does not run.
	capa *lab.CAPA
	// upstream are machine-api-operator's controllers and the upstream Cluster API core
	// (--upstream), nil when they do not run.
	upstream    *upstream.Controllers
	metricsAddr string
	// next is what to try first, shown to the user.
	next string
	// cancel stops the manager and the progress report. mgrDone is closed when the manager
	// has returned mgrErr; reported when the progress report has returned (nil if none runs).
	cancel   context.CancelFunc
	mgrDone  chan struct{}
	mgrErr   error
	reported chan struct{}
}

// startUpLab starts everything `machina up` runs in dir, seeds the platform's cluster
// (unless --no-demo) and then starts CAPA if the platform runs it. On error, everything
// started so far is stopped.
func startUpLab(ctx context.Context, dir string, f *upFlags, progress io.Writer) (u *upLab, err error) {
	plat, err := f.platformOf()
	if err != nil {
		return nil, err
	}
	withCAPA, err := f.capaFor(plat)
	if err != nil {
		return nil, err
	}
	if err := f.checkUpstream(plat); err != nil {
		return nil, err
	}
	settings := &controllers.Settings{}
	groups, err := selectGroups(settings, f.controllersFor(plat))
	if err != nil {
		return nil, err
	}
	progress = &lockedWriter{w: progress}
	l, err := lab.Start(ctx, lab.Options{Dir: dir, ControllerManager: true, Progress: progress})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	u = &upLab{lab: l, cancel: cancel}
	defer func() {
		if err != nil {
			u.stop()
		}
	}()
	if u.cloud, err = startLabCloud(ctx, dir, f, l); err != nil {
		return u, err
	}
	front := u.cloud.EC2()
	fmt.Fprintf(progress, "machina up: simulated cloud serving at %s\n", u.cloud.URL())
	fmt.Fprintf(progress, "machina up: EC2 endpoint at %s; for AWS clients:\n%s\n", front.URL(), front.ExportLine())

	// The groups read their settings when the manager sets them up, below.
	settings.Sim.CloudURL = u.cloud.URL()
	settings.AWS = aws.Options{Endpoint: front.URL(), ELBEndpoint: front.URL() + ec2.PathELB, ELBv2Endpoint: front.URL() + ec2.PathELBv2}
	env := manager.Env{}
	errc, metricsAddr, err := startLabManager(ctx, l, groups, env)
	if err != nil {
		return u, err
	}
	u.metricsAddr, u.mgrDone = metricsAddr, make(chan struct{})
	go func() {
		u.mgrErr = <-errc
		close(u.mgrDone)
	}()
	fmt.Fprintf(progress, "machina up: %d controller group(s) running: %s\n", len(groups), groupNames(groups))
	u.next = "kubectl get machines.machine.openshift.io -A"
	if !f.noDemo {
		s, c, err := seedPlatform(ctx, l, f, plat, front.ExportLine())
		if err != nil {
			return u, fmt.Errorf("seeding the %s cluster: %w", plat.name, err)
		}
		fmt.Fprintf(progress, "machina up: %s\n", s.summary)
		u.next = s.next
		mapiNS, _ := env.Namespaces()
		u.reported = make(chan struct{})
		go func() {
			defer close(u.reported)
			reportMachines(ctx, c, mapiNS, progress)
		}()
	}
	if withCAPA {
		if u.capa, err = startUpCAPA(ctx, l, f, front, progress); err != nil {
			return u, err
		}
	}
	if f.upstream {
		if u.upstream, err = startUpUpstream(ctx, l, front, progress); err != nil {
			return u, err
		}
	}
	return u, nil
}

// wait runs until ctx ends (nil) or the controllers or the control plane fail.
func (u *upLab) wait(ctx context.Context) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-u.mgrDone:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("the controllers stopped: %w", u.mgrErr)
		case <-tick.C:
			if err := u.lab.Failed(); err != nil {
				return fmt.Errorf("the lab failed: %w", err)
			}
			if u.upstream != nil {
				if err := u.upstream.Failed(); err != nil {
					return fmt.Errorf("an upstream controller stopped: %w", err)
				}
			}
		}
	}
}

// stop ends the controllers (CAPA's with its webhook registrations, while kube-apiserver
// still runs, then machina's), the cloud and the control plane, in that order.
func (u *upLab) stop() {
	u.upstream.Stop()
	u.upstream = nil
	u.capa.Stop()
	u.capa = nil
	u.cancel()
	// The manager logs its own shutdown error; stopping is not a failure.
	for _, done := range []chan struct{}{u.mgrDone, u.reported} {
		if done != nil {
			<-done
		}
	}
	if u.cloud != nil {
		u.cloud.Close()
	}
	u.lab.Stop()
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
		EC2:    &ec2.Options{Addr: f.ec2Listen},
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
func startLabManager(ctx context.Context, l *lab.Lab, groups []manager.Group, env manager.Env) (<-chan error, string, error) {
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
		Groups: groups, Env: env})
	if err != nil {
		return nil, "", fmt.Errorf("controllers: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return done, metricsAddr, nil
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
