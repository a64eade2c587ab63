// Package manager assembles machina's controllers into a controller-runtime manager. Each
// controller family is a Group; the list of groups built into machina is kept by the caller
// (internal/controllers), and `machina manager --controllers` and `machina up` choose which
// of them run. This package imports no controller package.
package manager

import (
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/patch"
	"github.com/machina-dev/machina/internal/provider"
)

// Group is a set of controllers that are enabled or disabled together.
type Group struct {
	// Name is what --controllers selects, e.g. "machineapi".
	Name string
	// Description is one line for --help.
	Description string
	// Setup adds the group's controllers to the manager.
	Setup func(mgr ctrl.Manager, env Env) error
	// Always marks a group that runs whatever --controllers says (the operator metrics).
	Always bool
	// MachineAPIKinds are the providerSpec kinds whose Machine API Machine controller the
	// group runs. New gathers those of the selected groups into Env.MachineAPIKinds.
	MachineAPIKinds []string
	// AddFlags, when set, registers the group's own command-line flags (a cloud's endpoint,
	// the webhook's address): settings only this group reads, kept in the group's own
	// options rather than in Env. The flags are registered whether or not the group is
	// selected, so --help lists them all.
	AddFlags func(fs *pflag.FlagSet)
}

// Env is what the groups share beyond the manager itself. A setting only one group reads
// belongs to that group's options (Group.AddFlags), so this package names no cloud.
type Env struct {
	// Resync is how often controllers look at healthy objects without an event (each
	// controller's default when zero). Tests shorten it.
	Resync time.Duration
	// MachineAPINamespace and ClusterAPINamespace are where the sync controllers find each
	// API's copies; DefaultMachineAPINamespace and DefaultClusterAPINamespace when empty.
	MachineAPINamespace string
	ClusterAPINamespace string
	// AutoscalerFieldManager is the field manager whose writes of a Cluster API MachineSet's
	// spec.replicas the sync carries over to an authoritative Machine API MachineSet;
	// DefaultAutoscalerFieldManager when empty.
	AutoscalerFieldManager string
	// MachineAPIKinds is set by New: the providerSpec kinds whose Machine API Machine
	// controller runs in this process (the selected groups' Group.MachineAPIKinds). The
	// Machine API MachineSet creates such Machines with that controller's finalizer, which
	// its first pass would otherwise write.
	MachineAPIKinds []string
	// Providers are the infrastructure platforms the platform-neutral controllers (sync,
	// migration) know; provider.Builtin() when nil.
	Providers *provider.Registry
	// AdditionalSyncMachineLabels mirrors the Cluster API machine controller's flag of the same
	// name (--additional-sync-machine-labels): label keys matching one of these patterns are
	// propagated from Machines to Nodes, so the sync can carry Machine API node labels
	// (spec.metadata.labels) matching them. Give both controllers the same patterns.
	AdditionalSyncMachineLabels []*regexp.Regexp
	// MachineConcurrency is how many Machines each platform's Machine API Machine controller
	// reconciles at once (--max-concurrent-reconciles); the controller's default when zero.
	MachineConcurrency int
}

// ProviderRegistry returns Providers with its default applied.
func (e Env) ProviderRegistry() *provider.Registry {
	if e.Providers == nil {
		return provider.Builtin()
	}
	return e.Providers
}

// DefaultAutoscalerFieldManager is the field manager the cluster autoscaler's writes carry
// (derived from its User-Agent).
const DefaultAutoscalerFieldManager = "cluster-autoscaler"

// AutoscalerManager returns AutoscalerFieldManager with its default applied.
func (e Env) AutoscalerManager() string {
	if e.AutoscalerFieldManager == "" {
		return DefaultAutoscalerFieldManager
	}
	return e.AutoscalerFieldManager
}

// The namespaces OpenShift uses for each API.
const (
	DefaultMachineAPINamespace = authority.DefaultMachineAPINamespace
	DefaultClusterAPINamespace = authority.DefaultClusterAPINamespace
)

// Namespaces returns the namespace pair with defaults applied.
func (e Env) Namespaces() (mapi, capi string) {
	mapi, capi = e.MachineAPINamespace, e.ClusterAPINamespace
	if mapi == "" {
		mapi = DefaultMachineAPINamespace
	}
	if capi == "" {
		capi = DefaultClusterAPINamespace
	}
	return mapi, capi
}

// Select resolves a --controllers value against all, the groups built into the binary: "*"
// (every group), a comma-separated list of names, and "-name" to drop a group from "*".
// Groups marked Always are selected whatever spec says. Unknown names are an error that
// lists the known ones. The result keeps the order of all.
func Select(all []Group, spec string) ([]Group, error) {
	known := map[string]Group{}
	var names []string
	for _, g := range all {
		known[g.Name] = g
		names = append(names, g.Name)
	}
	chosen := map[string]bool{}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		name := strings.TrimPrefix(item, "-")
		g, ok := known[name]
		switch {
		case item == "":
		case item == "*":
			for _, g := range all {
				chosen[g.Name] = true
			}
		case !ok:
			return nil, unknownGroup(name, names)
		case name != item && g.Always:
			return nil, fmt.Errorf("controller group %q always runs; it cannot be left out", name)
		case name != item:
			delete(chosen, name)
		default:
			chosen[name] = true
		}
	}
	var out []Group
	for _, g := range all {
		if chosen[g.Name] || g.Always {
			out = append(out, g)
		}
	}
	return out, nil
}

func unknownGroup(name string, known []string) error {
	if len(known) == 0 {
		return fmt.Errorf("unknown controller group %q: no controller groups are built into this machina", name)
	}
	return fmt.Errorf("unknown controller group %q (known: %s)", name, strings.Join(known, ", "))
}

// Options configure the manager process.
type Options struct {
	// MetricsAddr is where /metrics is served: over HTTPS, to callers the apiserver
	// authenticates and authorizes for "get" on /metrics; DefaultMetricsAddr when empty, "0"
	// turns it off.
	MetricsAddr string
	// MetricsInsecure serves /metrics over plain HTTP without authentication instead; only
	// allowed on a loopback MetricsAddr (machina up, benchmarks).
	MetricsInsecure bool
	// MetricsCertDir may hold the metrics endpoint's tls.crt and tls.key, reloaded when they
	// change; a self-signed certificate is made when they are missing.
	MetricsCertDir string
	// Pprof serves Go's profiling endpoints (PprofPaths) on the metrics endpoint, behind the
	// same authentication (or on loopback with MetricsInsecure).
	Pprof                   bool
	HealthProbeAddr         string
	LeaderElection          bool
	LeaderElectionNamespace string
	LeaderElectionID        string
	// LeaseDuration, RenewDeadline and RetryPeriod time the leader election (defaults below,
	// used for zero): see LeaderElectionTiming.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	Groups        []Group
	Env           Env
}

// Leader election holds a Lease in the manager's namespace (machina-system when installed from config/).
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update,namespace=machina-system

// quietWarnings returns a copy of cfg whose clients log each distinct API server warning once
// per process. The API server warns on every create or update that sets a finalizer name
// without a "/" (Cluster API's machine.cluster.x-k8s.io, the Machine API's
// machine.machine.openshift.io, the providers' own such as
// simmachine.infrastructure.machina.dev and CAPA's awsmachine.infrastructure.cluster.x-k8s.io);
// those names are the upstream contract and stay, and logged on every such write they were
// over a quarter of a busy manager's log.
func quietWarnings(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	if cfg.WarningHandler == nil && cfg.WarningHandlerWithContext == nil {
		cfg.WarningHandlerWithContext = ctrllog.NewKubeAPIWarningLogger(ctrllog.KubeAPIWarningLoggerOptions{Deduplicate: true})
	}
	return cfg
}

// New builds a manager with health and readiness checks and the selected groups' controllers.
func New(cfg *rest.Config, o Options) (ctrl.Manager, error) {
	if o.LeaderElectionID == "" {
		o.LeaderElectionID = "machina-manager"
	}
	cfg = quietWarnings(cfg)
	if v := os.Getenv("MACHINA_DEBUG_WRITES"); v != "" {
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return debugRT{next: rt, detail: v == "2"} })
	}
	metrics, err := o.metricsServer()
	if err != nil {
		return nil, err
	}
	lease, renew, retry, err := o.leaderElectionTiming()
	if err != nil {
		return nil, err
	}
	// The scheme has every registered platform's types: the sync writes the converter's
	// typed InfraMachines and templates of whichever platform a Machine is on.
	s, err := o.Env.ProviderRegistry().Scheme()
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: s,
		// The one client every controller writes through remembers the versions its own
		// locked patches replaced, so a pass working from a cache that has not yet seen
		// them sends no patch doomed to conflict (internal/patch, superseded.go).
		NewClient:                     patch.NewClientWithWriteRecord,
		Cache:                         cacheOptions(),
		Metrics:                       metrics,
		HealthProbeBindAddress:        o.HealthProbeAddr,
		LeaderElection:                o.LeaderElection,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &lease,
		RenewDeadline:                 &renew,
		RetryPeriod:                   &retry,
		// Setting up the controllers waits out an API server that is briefly away.
		MapperProvider: newPatientMapper,
		// A process may run a manager again after stopping one (tests, crash simulations).
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return fmt.Errorf("informer caches not synced")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	for _, g := range o.Groups {
		o.Env.MachineAPIKinds = append(o.Env.MachineAPIKinds, g.MachineAPIKinds...)
	}
	for _, g := range o.Groups {
		if err := g.Setup(mgr, o.Env); err != nil {
			return nil, fmt.Errorf("controller group %s: %w", g.Name, err)
		}
	}
	return mgr, nil
}
