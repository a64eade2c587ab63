// Package manager assembles machina's controllers into a controller-runtime manager. Each
// controller family registers a Group; `machina manager --controllers` and `machina up`
// choose which groups run.
package manager

import (
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/machina-dev/machina/internal/opsmetrics"
	"github.com/machina-dev/machina/internal/provider"
	"github.com/machina-dev/machina/internal/scheme"
)

// Group is a set of controllers that are enabled or disabled together.
type Group struct {
	// Name is what --controllers selects, e.g. "machineapi".
	Name string
	// Description is one line for --help.
	Description string
	// Setup adds the group's controllers to the manager.
	Setup func(mgr ctrl.Manager, env Env) error
}

// Env is what a Group needs beyond the manager itself.
type Env struct {
	// CloudURL is the simulated cloud's endpoint, for the simulated provider's controllers.
	CloudURL string
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
	// Webhook configures the admission webhook of the "admission" group.
	Webhook WebhookEnv
	// Providers are the infrastructure platforms the platform-neutral controllers (sync,
	// migration) know; provider.Builtin() when nil.
	Providers *provider.Registry
}

// ProviderRegistry returns Providers with its default applied.
func (e Env) ProviderRegistry() *provider.Registry {
	if e.Providers == nil {
		return provider.Builtin()
	}
	return e.Providers
}

// WebhookEnv says where the admission webhook listens and how the apiserver reaches it.
type WebhookEnv struct {
	// ListenAddr is the HTTPS address; 127.0.0.1:0 when empty (an apiserver on this host).
	ListenAddr string
	// Service is "namespace/name:port" of the Service in front of the manager in a cluster;
	// empty means the apiserver calls https://<ListenAddr> directly.
	Service string
	// CertDir may hold tls.crt, tls.key and ca.crt; otherwise a self-signed one is made.
	CertDir string
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
	DefaultMachineAPINamespace = "openshift-machine-api"
	DefaultClusterAPINamespace = "openshift-cluster-api"
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

var (
	mu     sync.Mutex
	groups = map[string]Group{}
)

// Register adds a controller group. It is called from init functions of controller packages
// (or from tests) and panics on a duplicate name, which is a programming error.
func Register(g Group) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := groups[g.Name]; dup {
		panic("manager: controller group registered twice: " + g.Name)
	}
	groups[g.Name] = g
}

// Groups returns the registered groups sorted by name.
func Groups() []Group {
	mu.Lock()
	defer mu.Unlock()
	out := make([]Group, 0, len(groups))
	for _, g := range groups {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Select resolves a --controllers value: "*" (every group), a comma-separated list of names,
// and "-name" to drop a group from "*". Unknown names are an error that lists the known ones.
func Select(spec string) ([]Group, error) {
	all := Groups()
	known := map[string]Group{}
	var names []string
	for _, g := range all {
		known[g.Name] = g
		names = append(names, g.Name)
	}
	chosen := map[string]bool{}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		switch {
		case item == "":
		case item == "*":
			for _, g := range all {
				chosen[g.Name] = true
			}
		case strings.HasPrefix(item, "-"):
			if _, ok := known[item[1:]]; !ok {
				return nil, unknownGroup(item[1:], names)
			}
			delete(chosen, item[1:])
		default:
			if _, ok := known[item]; !ok {
				return nil, unknownGroup(item, names)
			}
			chosen[item] = true
		}
	}
	var out []Group
	for _, g := range all {
		if chosen[g.Name] {
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
	MetricsAddr             string
	HealthProbeAddr         string
	LeaderElection          bool
	LeaderElectionNamespace string
	LeaderElectionID        string
	Groups                  []Group
	Env                     Env
}

// Leader election holds a Lease in the manager's namespace (machina-system when installed from config/).
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update,namespace=machina-system

// New builds a manager with health and readiness checks and the selected groups' controllers.
func New(cfg *rest.Config, o Options) (ctrl.Manager, error) {
	if o.LeaderElectionID == "" {
		o.LeaderElectionID = "machina-manager"
	}
	if os.Getenv("MACHINA_DEBUG_WRITES") != "" {
		cfg = rest.CopyConfig(cfg)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return debugRT{rt} })
	}
	lease := 15 * time.Second
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme.Scheme,
		Metrics:                       metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:        o.HealthProbeAddr,
		LeaderElection:                o.LeaderElection,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &lease,
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
	mapiNS, capiNS := o.Env.Namespaces()
	opsmetrics.Use(opsmetrics.Source{Reader: mgr.GetCache(), MachineAPINamespace: mapiNS, ClusterAPINamespace: capiNS})
	for _, g := range o.Groups {
		if err := g.Setup(mgr, o.Env); err != nil {
			return nil, fmt.Errorf("controller group %s: %w", g.Name, err)
		}
	}
	return mgr, nil
}
