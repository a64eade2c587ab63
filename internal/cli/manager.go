package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

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
	cloudURL               string
	aws                    awsFlags
	autoscalerFieldManager string
	webhook                manager.WebhookEnv
	qps                    float32
	burst                  int
	syncLabels             []string
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
			groups, err := selectGroups(f.controllers)
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
				Groups: groups, Env: manager.Env{CloudURL: f.cloudURL, AutoscalerFieldManager: f.autoscalerFieldManager, Webhook: f.webhook,
					AdditionalSyncMachineLabels: syncLabels,
					AWSEndpoint:                 f.aws.endpoint, AWSELBEndpoint: f.aws.elbEndpoint, AWSELBv2Endpoint: f.aws.elbv2Endpoint},
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
			return mgr.Start(cmd.Context())
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
	fl.StringVar(&f.cloudURL, "cloud-url", "", "endpoint of the simulated cloud, for the simulated provider's controllers")
	f.aws.register(cmd)
	fl.StringVar(&f.autoscalerFieldManager, "autoscaler-field-manager", manager.DefaultAutoscalerFieldManager,
		"field manager of the cluster autoscaler: its replicas changes on a Cluster API MachineSet mirror are carried over to the authoritative Machine API MachineSet")
	fl.StringVar(&f.webhook.ListenAddr, "webhook-bind-address", "", `HTTPS address of the admission webhook (group "admission"); default 127.0.0.1 on a free port, for an apiserver on this host`)
	fl.StringVar(&f.webhook.Service, "webhook-service", "", `Service through which the apiserver reaches the webhook, "namespace/name:port" (in a cluster; then --webhook-bind-address is typically ":9443")`)
	fl.StringVar(&f.webhook.CertDir, "webhook-cert-dir", "", "directory with tls.crt, tls.key and ca.crt for the webhook (for example a mounted cert-manager Secret); a self-signed certificate is made when empty")
	fl.Float32Var(&f.qps, "kube-api-qps", 100, "sustained requests per second to the Kubernetes API")
	fl.IntVar(&f.burst, "kube-api-burst", 200, "burst of requests to the Kubernetes API")
	fl.StringSliceVar(&f.syncLabels, "additional-sync-machine-labels", nil,
		"regular expressions of further Machine label keys the Cluster API machine controller propagates to Nodes; mirrors, and must match, that controller's flag of the same name. "+
			"The sync carries Machine API node labels (spec.metadata.labels) matching one of them; others, outside node-role.kubernetes.io/*, node-restriction.kubernetes.io/* and node.cluster.x-k8s.io/*, fail conversion")
	return cmd
}

// awsFlags are the EC2 endpoints of the AWS provider's controllers (group "aws"). Their
// credentials are a Machine's credentialsSecret, else the AWS SDK's default chain
// (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, the shared config and credentials files, web
// identity, instance metadata).
type awsFlags struct {
	endpoint, elbEndpoint, elbv2Endpoint string
}

func (a *awsFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&a.endpoint, "aws-endpoint", "",
		`EC2 endpoint URL of the AWS provider's controllers (group "aws"), e.g. the simulated cloud's EC2 front; default: the AWS SDK's standard resolution (AWS_ENDPOINT_URL_EC2, AWS_ENDPOINT_URL, the shared config file, the region's public endpoint)`)
	fl.StringVar(&a.elbEndpoint, "aws-elb-endpoint", "",
		"classic Elastic Load Balancing endpoint URL the AWS actuator registers control-plane Machines with; default: the AWS SDK's standard resolution (AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING, ...)")
	fl.StringVar(&a.elbv2Endpoint, "aws-elbv2-endpoint", "",
		"Elastic Load Balancing v2 (network load balancers) endpoint URL; default: the AWS SDK's standard resolution (AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING_V2, ...)")
}

// restConfig loads a client configuration from an explicit kubeconfig path or the defaults.
func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, &ExitError{Code: 2, Err: fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)}
		}
		return cfg, nil
	}
	cfg, err := config.GetConfig()
	if err != nil {
		return nil, &ExitError{Code: 2, Err: fmt.Errorf("no cluster to talk to (set --kubeconfig or KUBECONFIG): %w", err)}
	}
	return cfg, nil
}
