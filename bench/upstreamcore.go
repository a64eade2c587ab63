package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/scheme"
)

// core is the -core flag of capi-scale: whose Cluster API core controllers run, machina's
// ("machina") or the upstream Cluster API release's ("upstream", built from the pinned
// module).
var core = "machina"

// infraProvider is the -provider flag of capi-scale: machina's simulated provider ("sim",
// instances in the simulated cloud booting into Nodes with kubelets) or a trivial one
// ("trivial": a Node and a providerID for each SimMachine at once, in this process) that
// shows what the core alone costs.
var infraProvider = "sim"

// capiScaleGroups is the manager's --controllers for capi-scale's -core, beside the
// platform's groups.
func capiScaleGroups(platformGroups string) string {
	var groups []string
	if core == "machina" {
		groups = append(groups, "clusterapi")
	}
	if platformGroups != "" {
		groups = append(groups, platformGroups)
	}
	return strings.Join(groups, ",")
}

// extraControllers starts what capi-scale's -core and -provider ask for beside the manager:
// the upstream core, the trivial provider. report says per Machine what they wrote; writes
// is how many writes they made in all so far.
func extraControllers(e *env) (report func(n int) string, writes func() int64, stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, s := range stops {
			s()
		}
	}
	var parts []func(n int) string
	var counters []func() int64
	if core == "upstream" {
		dir, err := lab.ModuleDir("sigs.k8s.io/cluster-api/util")
		if err != nil {
			return nil, nil, stop, err
		}
		c, err := e.lab.StartCAPICore(context.Background(), dir, os.Stderr)
		if err != nil {
			return nil, nil, stop, err
		}
		stops = append(stops, c.Stop)
		w0, err := writesAt(c.MetricsURL)
		if err != nil {
			return nil, nil, stop, err
		}
		parts = append(parts, func(n int) string {
			w, err := writesAt(c.MetricsURL)
			if err != nil {
				return "upstream core writes: " + err.Error()
			}
			return fmt.Sprintf("upstream core %.2f writes per Machine", float64(w-w0)/float64(n))
		})
		counters = append(counters, func() int64 { w, _ := writesAt(c.MetricsURL); return w })
	}
	if infraProvider == "trivial" {
		w, cancel, err := startTrivialProvider(e.lab.Config)
		if err != nil {
			return nil, nil, stop, err
		}
		stops = append(stops, cancel)
		parts = append(parts, func(n int) string {
			return fmt.Sprintf("trivial provider %.2f writes per Machine", float64(w.Load())/float64(n))
		})
		counters = append(counters, w.Load)
	}
	report = func(n int) string {
		var out []string
		for _, p := range parts {
			out = append(out, p(n))
		}
		if len(out) == 0 {
			return ""
		}
		return "(" + strings.Join(out, "; ") + ")"
	}
	writes = func() int64 {
		var total int64
		for _, c := range counters {
			total += c()
		}
		return total
	}
	return report, writes, stop, nil
}

// startTrivialProvider runs, in this process, an infrastructure provider that does nothing
// but follow the contract: a SimCluster is provisioned at once; a SimMachine gets a Node
// (no kubelet behind it) and the Node's providerID, and is provisioned. It returns its
// write counter.
func startTrivialProvider(cfg *rest.Config) (*atomic.Int64, func(), error) {
	var writes atomic.Int64
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 1000, 2000
	cfg.Wrap(countWrites(&writes))
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0"})
	if err != nil {
		return nil, nil, err
	}
	c := mgr.GetClient()
	if err := ctrl.NewControllerManagedBy(mgr).Named("trivial-simcluster").For(&infrav1.SimCluster{}).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			sc := &infrav1.SimCluster{}
			if err := c.Get(ctx, req.NamespacedName, sc); err != nil || ptr.Deref(sc.Status.Initialization.Provisioned, false) {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
			p := client.MergeFrom(sc.DeepCopy())
			sc.Status.Initialization.Provisioned = ptr.To(true)
			return reconcile.Result{}, c.Status().Patch(ctx, sc, p)
		})); err != nil {
		return nil, nil, err
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("trivial-simmachine").For(&infrav1.SimMachine{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 10}).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			return reconcile.Result{}, trivialMachine(ctx, c, req)
		})); err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = mgr.Start(ctx) }()
	return &writes, cancel, nil
}

func trivialMachine(ctx context.Context, c client.Client, req reconcile.Request) error {
	sm := &infrav1.SimMachine{}
	if err := c.Get(ctx, req.NamespacedName, sm); err != nil || !sm.DeletionTimestamp.IsZero() {
		return client.IgnoreNotFound(err)
	}
	if sm.Spec.ProviderID == "" {
		id := "trivial:///" + sm.Name
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: sm.Name}, Spec: corev1.NodeSpec{ProviderID: id}}
		if err := c.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		p := client.MergeFrom(sm.DeepCopy())
		sm.Spec.ProviderID = id
		if err := c.Patch(ctx, sm, p); err != nil {
			return err
		}
	}
	if ptr.Deref(sm.Status.Initialization.Provisioned, false) {
		return nil
	}
	p := client.MergeFrom(sm.DeepCopy())
	sm.Status.Initialization.Provisioned = ptr.To(true)
	return c.Status().Patch(ctx, sm, p)
}
