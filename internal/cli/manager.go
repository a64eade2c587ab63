package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/machina-dev/machina/internal/controllers"
	"github.com/machina-dev/machina/internal/controllers/machineapi/machine"
	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/manager"
)

type managerFlags struct {
	kubeconfig             string
	controllers            string
	metricsAddr            string
	metricsInsecure        bool
	metricsCertDir         string
	pprof                  bool
	probeAddr              string
	leaderElect            bool
	leaderNamespace        string
	leaderID               string
	leaseDuration          time.Duration
	renewDeadline          time.Duration
	retryPeriod            time.Duration
	groups                 controllers.Settings
	autoscalerFieldManager string
	qps                    float32
	burst                  int
	syncLabels             []string
	machineConcurrency     int
}

func newManagerCommand() *cobra.Command {
	f := &managerFlags{}
	cmd := &cobra.Command{
		Use:   "manager",
		Short: "Run machina's controllers against an existing cluster",
		Long: `Run machina's controllers against a Kubernetes cluster, the way an operator runs them:
leader election, Prometheus metrics and health probes included.

The cluster is found from --kubeconfig, then $KUBECONFIG, then the in-cluster service account.
The CRDs must already be installed (machina up does this for its lab; see docs/install.md for a
real cluster).

--controllers selects controller groups: "*" runs all of them, a comma-separated list runs
only those, and "-name" removes a group from "*". Controller groups in this build:
` + groupHelp(),
		Example: `  # every controller, against the cluster in $KUBECONFIG
  machina manager

  # only some groups, without leader election (a single replica)
  machina manager --controllers=sync,migration --leader-elect=false`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			syncLabels, err := convert.ParseSyncMachineLabels(f.syncLabels)
			if err != nil {
				return &ExitError{Code: 2, Err: err}
			}
			if f.machineConcurrency < 1 {
				return &ExitError{Code: 2, Err: fmt.Errorf("--max-concurrent-reconciles %d: must be at least 1", f.machineConcurrency)}
			}
			groups, err := selectGroups(&f.groups, f.controllers)
			if err != nil {
				return err
			}
			cfg, err := restConfig(f.kubeconfig)
			if err != nil {
				return err
			}
			cfg.QPS, cfg.Burst = f.qps, f.burst
			mgr, err := manager.New(cfg, manager.Options{
				MetricsAddr: f.metricsAddr, MetricsInsecure: f.metricsInsecure, MetricsCertDir: f.metricsCertDir, Pprof: f.pprof,
				HealthProbeAddr: f.probeAddr,
				LeaderElection:  f.leaderElect, LeaderElectionNamespace: f.leaderNamespace, LeaderElectionID: f.leaderID,
				LeaseDuration: f.leaseDuration, RenewDeadline: f.renewDeadline, RetryPeriod: f.retryPeriod,
				Groups: groups, Env: manager.Env{AutoscalerFieldManager: f.autoscalerFieldManager, AdditionalSyncMachineLabels: syncLabels,
					MachineConcurrency: f.machineConcurrency},
			})
			if err != nil {
				return err
			}
			names := make([]string, 0, len(groups))
			for _, g := range groups {
				names = append(names, g.Name)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "machina manager: starting controller groups [%s] against %s\n",
				strings.Join(names, ", "), cfg.Host)
			return runManager(cmd.Context(), mgr)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, then in-cluster)")
	fl.StringVar(&f.controllers, "controllers", "*", "controller groups to run (see above)")
	fl.StringVar(&f.metricsAddr, "metrics-bind-address", manager.DefaultMetricsAddr,
		`HTTPS address of the Prometheus /metrics endpoint, for callers allowed "get" on /metrics (ClusterRole machina-metrics-reader); 0 disables it`)
	fl.BoolVar(&f.metricsInsecure, "metrics-insecure", false, "serve /metrics over plain HTTP without authentication; only with a loopback --metrics-bind-address")
	fl.StringVar(&f.metricsCertDir, "metrics-cert-dir", "", "directory with the metrics endpoint's tls.crt and tls.key (reloaded when they change); a self-signed certificate is made when empty")
	fl.BoolVar(&f.pprof, "pprof", false, "serve Go's profiling endpoints under /debug/pprof/ on the metrics endpoint, behind its authentication (ClusterRole machina-profiler)")
	fl.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	fl.BoolVar(&f.leaderElect, "leader-elect", true, "elect a leader so only one replica reconciles at a time")
	fl.StringVar(&f.leaderNamespace, "leader-election-namespace", "", "namespace of the leader-election Lease (default: the pod's namespace)")
	fl.StringVar(&f.leaderID, "leader-election-id", "machina-manager", "name of the leader-election Lease")
	fl.DurationVar(&f.leaseDuration, "leader-elect-lease-duration", manager.DefaultLeaseDuration,
		"how long a standby waits on a Lease its leader stopped renewing before taking over: a leader that dies stalls reconciling about this long plus --leader-elect-retry-period")
	fl.DurationVar(&f.renewDeadline, "leader-elect-renew-deadline", manager.DefaultRenewDeadline,
		"how long the leader keeps retrying a failed renewal before it stops (and the process exits non-zero); with --leader-elect-retry-period it must stay under --leader-elect-lease-duration")
	fl.DurationVar(&f.retryPeriod, "leader-elect-retry-period", manager.DefaultRetryPeriod,
		"how often the leader renews the Lease and a standby tries to take it")
	addGroupFlags(fl, &f.groups)
	fl.StringVar(&f.autoscalerFieldManager, "autoscaler-field-manager", manager.DefaultAutoscalerFieldManager,
		"field manager of the cluster autoscaler: its replicas changes on a Cluster API MachineSet mirror are carried over to the authoritative Machine API MachineSet")
	fl.IntVar(&f.machineConcurrency, "max-concurrent-reconciles", machine.DefaultMaxConcurrentReconciles,
		"how many Machines each platform's Machine API Machine controller reconciles at once (machine-api-operator's AWS controller runs 1); "+
			"how many Machines a MachineSet provisions at once is its machina.dev/max-provisioning annotation")
	fl.Float32Var(&f.qps, "kube-api-qps", 100, "sustained requests per second to the Kubernetes API")
	fl.IntVar(&f.burst, "kube-api-burst", 200, "burst of requests to the Kubernetes API")
	fl.StringSliceVar(&f.syncLabels, "additional-sync-machine-labels", nil,
		"regular expressions of further Machine label keys the Cluster API machine controller propagates to Nodes; mirrors, and must match, that controller's flag of the same name. "+
			"The sync carries Machine API node labels (spec.metadata.labels) matching one of them; others, outside node-role.kubernetes.io/*, node-restriction.kubernetes.io/* and node.cluster.x-k8s.io/*, fail conversion")
	return cmd
}

// runManager runs mgr until SIGINT or SIGTERM (it then stops its controllers and releases its
// Lease, so a standby takes over at once) or until it fails. A leader that loses its Lease
// gets "leader election lost" from mgr.Start: that error ends the process with a non-zero code
// and nothing here starts the manager again, so a replica that lost its Lease writes no more.
func runManager(parent context.Context, mgr ctrl.Manager) error {
	ctx, stop := signalContext(parent)
	defer stop()
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("manager stopped: %w", err)
	}
	return nil
}

// restConfig loads a client configuration from an explicit kubeconfig path or the defaults.
func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, &ExitError{Code: 2, Err: fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)}
		}
		return withCLIRate(cfg), nil
	}
	cfg, err := config.GetConfig()
	if err != nil {
		return nil, &ExitError{Code: 2, Err: fmt.Errorf("no cluster to talk to (set --kubeconfig or KUBECONFIG): %w", err)}
	}
	return withCLIRate(cfg), nil
}

// withCLIRate sets the client-side rate limit of the commands that read a fleet (plan,
// migrate, describe) to kubectl's, 50 requests a second: client-go's default of 5 made plan
// and migrate --all spend a minute on a 200-Machine fleet. The API server's priority and
// fairness protects it from any one client. The manager sets its own (--kube-api-qps).
func withCLIRate(cfg *rest.Config) *rest.Config {
	cfg.QPS, cfg.Burst = 50, 100
	return cfg
}
