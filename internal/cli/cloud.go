package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/ec2"
	"github.com/machina-dev/machina/internal/cloud/kubelet"
	"github.com/machina-dev/machina/internal/cloud/server"
)

type cloudFlags struct {
	stateDir      string
	listen        string
	kubeconfig    string
	catalogue     string
	pending       time.Duration
	shuttingDown  time.Duration
	retention     time.Duration
	maxUserData   int
	seed          uint64
	noSync        bool
	faults        []string
	nodeSync      time.Duration
	leaseRenew    time.Duration
	podStopTime   time.Duration
	nodeDeleteDel time.Duration
	ec2Listen     string
}

func defaultCloudStateDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return filepath.Join(".machina", "cloud")
	}
	return filepath.Join(d, "machina", "cloud")
}

func newCloudCommand() *cobra.Command {
	f := &cloudFlags{}
	cmd := &cobra.Command{
		Use:   "cloud",
		Short: "Run the simulated cloud on its own",
		Long: `Run machina's simulated cloud: an EC2-like HTTP/JSON API on a loopback address
(instances, networks, scaling groups, a catalogue of regions, zones, instance types and
images) with injectable faults. machina up runs the same cloud embedded.

It also speaks EC2's own protocol (plus STS and ELB) on a second loopback port
(--ec2-listen), over the same instances, for unmodified AWS clients: at start it prints an
export line with the lab key pair, the region and the endpoints to paste into a shell.

State lives in cloud.db in --state-dir: stop and start the cloud and every instance,
client token, network, scaling group and fault is still there. A state file that is not
the cloud's (corrupt, or another program's) is refused and left untouched.

With --kubeconfig, a simulated kubelet registers a Node in that cluster for every running
instance (provider ID sim://<region>/<zone>/<instance-id>), keeps it Ready with Lease
heartbeats, finishes the deletion of its terminating pods, and deletes Nodes whose
instance is gone.

Faults can be set at start with --fault (repeatable) and changed at run time through the
API (CreateFault, DescribeFaults, DeleteFaults, KillInstances) or the subcommands below
(machina cloud fault add|list|clear, machina cloud kill).

` + api.FaultSpecHelp + `

The API is documented in docs/cloud.md.`,
		Example: `  machina cloud --listen 127.0.0.1:8787
  machina cloud --kubeconfig ~/.cache/machina/up/kubeconfig --pending-delay 5s
  machina cloud --fault throttle,op=DescribeInstances,rate=0.2,retry-after=1 \
                --fault capacity,zone=sim-east-1c
  curl -s -XPOST localhost:8787/v1/DescribeInstances -d '{"tags":{"cluster":"a"}}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCloud(cmd, f) },
	}
	cmd.AddCommand(newCloudFaultCommand(), newCloudKillCommand(), newCloudInstancesCommand(), newCloudStatsCommand())
	fl := cmd.Flags()
	fl.StringVar(&f.stateDir, "state-dir", defaultCloudStateDir(), "directory of the cloud's state file (cloud.db)")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:8787", "loopback address to serve the API on (port 0 picks a free one)")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "cluster the simulated kubelet registers Nodes in (no kubelet when empty)")
	fl.StringVar(&f.catalogue, "catalogue", "", "JSON or YAML file adding regions, instance types and images to the built-in catalogue")
	fl.DurationVar(&f.pending, "pending-delay", 2*time.Second, "how long a new instance stays pending (0 for benchmarks)")
	fl.DurationVar(&f.shuttingDown, "shutting-down-delay", 2*time.Second, "how long a terminated instance stays shutting-down")
	fl.DurationVar(&f.retention, "terminated-retention", time.Hour, "how long terminated instances stay visible before they are purged")
	fl.IntVar(&f.maxUserData, "max-user-data", server.DefaultMaxUserDataBytes, "largest accepted user data, in bytes")
	fl.Uint64Var(&f.seed, "seed", 0, "seed of the fault injection random source (0: random)")
	fl.BoolVar(&f.noSync, "no-sync", false, "skip fsync of the state file (survives cloud restarts, not machine crashes)")
	fl.StringArrayVar(&f.faults, "fault", nil, "inject a fault at start, e.g. error,op=RunInstances,rate=0.1 (repeatable; see above)")
	fl.DurationVar(&f.nodeSync, "node-sync-interval", time.Second, "how often the kubelet compares instances with Nodes")
	fl.DurationVar(&f.leaseRenew, "lease-renew-interval", 2*time.Second, "how often Node Leases are renewed (the lab's kube-controller-manager allows 10s of silence; real clusters 40s)")
	fl.DurationVar(&f.podStopTime, "pod-stop-time", 0, "how long terminating pods take to stop (0: their full grace period)")
	fl.DurationVar(&f.nodeDeleteDel, "node-delete-delay", 0, "how long after its instance terminated a Node is deleted")
	fl.StringVar(&f.ec2Listen, "ec2-listen", "127.0.0.1:0", "loopback address of the EC2 endpoint (lab key pair, docs/cloud.md); empty: no EC2 endpoint")
	return cmd
}

func runCloud(cmd *cobra.Command, f *cloudFlags) error {
	var faults []api.Fault
	for _, spec := range f.faults {
		fault, err := api.ParseFaultSpec(spec)
		if err != nil {
			return &ExitError{Code: 2, Err: fmt.Errorf("--fault: %w", err)}
		}
		faults = append(faults, fault)
	}
	opts := server.Options{
		StateDir:         f.stateDir,
		Addr:             f.listen,
		Delays:           server.Delays{Pending: f.pending, ShuttingDown: f.shuttingDown, TerminatedRetention: f.retention},
		CatalogueFile:    f.catalogue,
		MaxUserDataBytes: f.maxUserData,
		Seed:             f.seed,
		NoSync:           f.noSync,
		Faults:           faults,
		Logger:           ctrl.Log.WithName("cloud"),
		Kubelet: kubelet.Options{
			SyncInterval:    f.nodeSync,
			RenewInterval:   f.leaseRenew,
			PodStopTime:     f.podStopTime,
			NodeDeleteDelay: f.nodeDeleteDel,
		},
	}
	if f.ec2Listen != "" {
		opts.EC2 = &ec2.Options{Addr: f.ec2Listen}
	}
	if f.kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
		if err != nil {
			return &ExitError{Code: 2, Err: fmt.Errorf("--kubeconfig %s: %w", f.kubeconfig, err)}
		}
		opts.KubeConfig = cfg
	}
	srv, err := server.New(opts)
	if err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	ctx, stop := signalContext(cmd.Context())
	defer stop()
	if err := srv.Start(ctx); err != nil {
		return err
	}
	defer srv.Close()
	kubeletNote := "no kubelet (no --kubeconfig)"
	if opts.KubeConfig != nil {
		kubeletNote = "kubelet registering Nodes at " + opts.KubeConfig.Host
	}
	fmt.Fprintf(cmd.OutOrStdout(), "machina cloud: serving %s (state in %s; %s). Ctrl-C stops it.\n",
		srv.URL(), filepath.Join(f.stateDir, "cloud.db"), kubeletNote)
	if front := srv.EC2(); front != nil {
		fmt.Fprintf(cmd.OutOrStdout(), "EC2 endpoint: %s (region %s). Point AWS clients at it with:\n%s\n", front.URL(), front.Region(), front.ExportLine())
	}
	<-ctx.Done()
	return nil
}
