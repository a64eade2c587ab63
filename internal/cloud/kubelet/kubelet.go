// Package kubelet is the simulated cloud's kubelet: it turns every running instance into a
// Node of a target cluster, keeps it Ready with Lease heartbeats, finishes the deletion
// of pods bound to it, and removes Nodes whose instances are gone (the job of the cloud
// node-lifecycle controller on a real cloud).
//
// One Kubelet serves every instance. It does not run a goroutine per Node: a periodic
// sweep compares the cloud's instances with the informer caches and queues the Node names
// that need work; a bounded pool of workers does it.
package kubelet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/machina-dev/machina/internal/cloud/api"
)

// Snapshot is the cloud as the kubelet needs to see it at one moment.
type Snapshot struct {
	Now time.Time
	// Instances are all instances the cloud still knows, terminated ones included until
	// they are purged.
	Instances     []api.Instance
	InstanceTypes map[string]api.InstanceType
	Images        map[string]api.Image
	// Faults are the active node-not-ready and node-condition faults.
	Faults []api.Fault
}

// Source gives the kubelet its view of the cloud.
type Source interface {
	KubeletSnapshot() Snapshot
}

// Options configure a Kubelet.
type Options struct {
	// Config reaches the cluster the Nodes register in. Required.
	Config *rest.Config
	// Source is the cloud. Required.
	Source Source
	Logger logr.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time

	// SyncInterval is how often instances and Nodes are compared; default 1s.
	SyncInterval time.Duration
	// LeaseDuration is the Lease's leaseDurationSeconds; default 40s.
	LeaseDuration time.Duration
	// RenewInterval is how often Leases are renewed; default 10s.
	RenewInterval time.Duration
	// StatusInterval is how often an unchanged Node status is re-posted; default 1m.
	StatusInterval time.Duration
	// PodStopTime is how long a pod's containers take to stop once the kubelet saw its
	// deletion; the pod is then deleted for good. It never exceeds the pod's grace period
	// (deletionGracePeriodSeconds); zero means the full grace period.
	PodStopTime time.Duration
	// NodeDeleteDelay is how long after its instance terminated a Node is deleted;
	// default 0.
	NodeDeleteDelay time.Duration
	// Workers bounds the concurrent API work; default 16.
	Workers int
	// QPS and Burst of the kubelet's client; default 200 and 400. The budget grows beyond
	// them with the Nodes served, so that every Lease is renewed on time (budget).
	QPS   float32
	Burst int
}

// Kubelet is the simulated kubelet of every instance of one cloud.
type Kubelet struct {
	opts    Options
	log     logr.Logger
	now     func() time.Time
	client  kubernetes.Interface
	budget  budget
	trigger chan struct{}
	queue   workqueue.TypedRateLimitingInterface[string]

	nodes  corelisters.NodeLister
	leases coordlisters.LeaseLister
	pods   cache.Indexer

	kubeletVersion string

	mu      sync.Mutex
	targets map[string]*target // by Node name
	known   map[string]bool    // instance IDs in the last snapshot
	types   map[string]api.InstanceType
	images  map[string]api.Image
	// terminating records when each terminating pod was first seen (its grace period
	// counts from there).
	terminating map[types.UID]time.Time
	// ownLeases and ownNodes: the last Lease and Node of each Node this kubelet wrote
	// (own.go).
	ownLeases map[string]*coordinationv1.Lease
	ownNodes  map[string]ownNode
}

// target is what one instance wants of its Node.
type target struct {
	inst     api.Instance
	notReady bool
	conds    []api.Fault // node-condition faults in scope
}

const podNodeIndex = "spec.nodeName"

// New checks the options. Run starts the work.
func New(opts Options) (*Kubelet, error) {
	if opts.Config == nil || opts.Source == nil {
		return nil, errors.New("kubelet: Config and Source are required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&opts.SyncInterval, time.Second)
	def(&opts.LeaseDuration, 40*time.Second)
	def(&opts.RenewInterval, 10*time.Second)
	def(&opts.StatusInterval, time.Minute)
	if opts.Workers <= 0 {
		opts.Workers = 16
	}
	cfg := rest.CopyConfig(opts.Config)
	cfg.QPS, cfg.Burst = 200, 400
	if opts.QPS > 0 {
		cfg.QPS = opts.QPS
	}
	if opts.Burst > 0 {
		cfg.Burst = opts.Burst
	}
	cfg.UserAgent = "machina-simulated-kubelet"
	b := newBudget(cfg.QPS, cfg.Burst)
	opts.QPS, cfg.RateLimiter = cfg.QPS, b
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubelet: %w", err)
	}
	return &Kubelet{
		budget:  b,
		opts:    opts,
		log:     opts.Logger,
		now:     opts.Now,
		client:  client,
		trigger: make(chan struct{}, 1),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, 10*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "simulated-kubelet"}),
		targets:     map[string]*target{},
		known:       map[string]bool{},
		terminating: map[types.UID]time.Time{},
		ownLeases:   map[string]*coordinationv1.Lease{},
		ownNodes:    map[string]ownNode{},
	}, nil
}

// Trigger asks for a sweep soon (the cloud calls it after changes).
func (k *Kubelet) Trigger() {
	select {
	case k.trigger <- struct{}{}:
	default:
	}
}

// Run serves until ctx ends.
func (k *Kubelet) Run(ctx context.Context) error {
	defer k.queue.ShutDown()
	// The cluster may not be up yet (or be restarting): keep trying.
	for {
		err := k.ensureLeaseNamespace(ctx)
		if err == nil {
			break
		}
		k.log.Info("waiting for the cluster", "error", err.Error())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	if v, err := k.client.Discovery().ServerVersion(); err == nil {
		k.kubeletVersion = v.GitVersion
	} else {
		k.kubeletVersion = "v0.0.0-simulated"
	}
	factory := informers.NewSharedInformerFactory(k.client, 0)
	leaseFactory := informers.NewSharedInformerFactoryWithOptions(k.client, 0,
		informers.WithNamespace(corev1.NamespaceNodeLease))
	podFactory := informers.NewSharedInformerFactoryWithOptions(k.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermNotEqualSelector("spec.nodeName", "").String()
		}))
	nodeInf := factory.Core().V1().Nodes()
	leaseInf := leaseFactory.Coordination().V1().Leases()
	podInf := podFactory.Core().V1().Pods().Informer()
	if err := podInf.AddIndexers(cache.Indexers{podNodeIndex: func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}, nil
		}
		return nil, nil
	}}); err != nil {
		return err
	}
	enqueuePod := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			k.enqueueIfTarget(p.Spec.NodeName)
		}
	}
	_, _ = podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueuePod,
		UpdateFunc: func(_, obj any) { enqueuePod(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				k.mu.Lock()
				delete(k.terminating, p.UID)
				k.mu.Unlock()
			}
		},
	})
	_, _ = nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		// A Node deleted behind our back is re-registered, as a real kubelet does.
		DeleteFunc: func(obj any) {
			if n, ok := obj.(*corev1.Node); ok {
				k.enqueueIfTarget(n.Name)
			}
		},
	})
	k.nodes = nodeInf.Lister()
	k.leases = leaseInf.Lister()
	k.pods = podInf.GetIndexer()
	factory.Start(ctx.Done())
	leaseFactory.Start(ctx.Done())
	podFactory.Start(ctx.Done())
	for _, synced := range []cache.InformerSynced{nodeInf.Informer().HasSynced, leaseInf.Informer().HasSynced, podInf.HasSynced} {
		if !cache.WaitForCacheSync(ctx.Done(), synced) {
			return ctx.Err()
		}
	}
	var wg sync.WaitGroup
	for range k.opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k.processNext(ctx) {
			}
		}()
	}
	t := time.NewTicker(k.opts.SyncInterval)
	defer t.Stop()
	for {
		start := time.Now()
		k.sweep()
		if !k.nextSweep(ctx, t.C, start, triggeredGap(time.Since(start))) {
			k.queue.ShutDown()
			wg.Wait()
			factory.Shutdown()
			leaseFactory.Shutdown()
			podFactory.Shutdown()
			return nil
		}
	}
}

// triggeredSweepGap is the least time between the start of a sweep and one the cloud asks
// for: each sweep looks at every instance, and a scale-up launches dozens a second, so
// sweeping on each launch made the kubelets' CPU grow with the square of the fleet.
const triggeredSweepGap = 100 * time.Millisecond

// sweepShare bounds the time triggered sweeps take: the next waits at least this many times
// as long as the last one took. At thousands of instances a sweep takes milliseconds, and
// one every 100 ms through a scale-up was the largest part of the kubelets' CPU (a tenth of
// a core at 5,000 instances, profiled in capi-scale -n 5000); a Node now registers up to a
// few hundred milliseconds later there instead.
const sweepShare = 50

// triggeredGap is the least time between the start of a sweep that took took and a sweep
// the cloud asks for: never more than a second (one sweep slowed by a busy machine does not
// hold every Node back long).
func triggeredGap(took time.Duration) time.Duration {
	return min(time.Second, max(triggeredSweepGap, sweepShare*took))
}

// nextSweep waits for the ticker or a trigger, a trigger no sooner than gap after last; it
// reports false when ctx ends.
func (k *Kubelet) nextSweep(ctx context.Context, tick <-chan time.Time, last time.Time, gap time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-tick:
		return true
	case <-k.trigger:
	}
	wait := time.NewTimer(gap - time.Since(last))
	defer wait.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-wait.C:
		return true
	}
}

func (k *Kubelet) ensureLeaseNamespace(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: corev1.NamespaceNodeLease}}
	_, err := k.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubelet: creating namespace %s: %w", corev1.NamespaceNodeLease, err)
	}
	return nil
}

func (k *Kubelet) enqueueIfTarget(node string) {
	k.mu.Lock()
	_, ok := k.targets[node]
	k.mu.Unlock()
	if ok {
		k.queue.Add(node)
	}
}

func (k *Kubelet) processNext(ctx context.Context) bool {
	key, quit := k.queue.Get()
	if quit {
		return false
	}
	defer k.queue.Done(key)
	requeue, err := k.syncNode(ctx, key)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			k.log.V(1).Info("syncing node failed; will retry", "node", key, "error", err.Error())
		}
		k.queue.AddRateLimited(key)
	default:
		k.queue.Forget(key)
		if requeue > 0 {
			k.queue.AddAfter(key, requeue)
		}
	}
	return true
}

// sweep takes a snapshot of the cloud, records what each Node should be and queues the
// Nodes that need work.
func (k *Kubelet) sweep() {
	snap := k.opts.Source.KubeletSnapshot()
	targets := make(map[string]*target, len(snap.Instances))
	known := make(map[string]bool, len(snap.Instances))
	for _, inst := range snap.Instances {
		known[inst.InstanceID] = true
		t := &target{inst: inst}
		for _, f := range snap.Faults {
			if !faultCovers(&f, &inst) {
				continue
			}
			switch f.Kind {
			case api.FaultNodeNotReady:
				t.notReady = true
			case api.FaultNodeCondition:
				t.conds = append(t.conds, f)
			}
		}
		targets[inst.Hostname] = t
	}
	k.mu.Lock()
	k.targets, k.known, k.types, k.images = targets, known, snap.InstanceTypes, snap.Images
	k.mu.Unlock()
	k.budget.size(k.opts.QPS, len(targets), k.opts.RenewInterval)

	now := snap.Now
	for name, t := range targets {
		if k.needsWork(t, now) {
			k.queue.Add(name)
		}
	}
	// Nodes of instances the cloud no longer knows (purged) are removed.
	nodes, _ := k.nodes.List(everything)
	for _, n := range nodes {
		if _, ok := targets[n.Name]; ok {
			continue
		}
		if pid, err := api.ParseProviderID(n.Spec.ProviderID); err == nil && !known[pid.InstanceID] {
			k.queue.Add(n.Name)
		}
	}
}

// needsWork is a cheap check against the caches.
func (k *Kubelet) needsWork(t *target, now time.Time) bool {
	node, exists, _ := k.currentNode(t.inst.Hostname, now)
	switch t.inst.State {
	case api.StatePending:
		return false
	case api.StateShuttingDown, api.StateTerminated, api.StateStopping, api.StateStopped:
		return exists
	}
	if !exists || !k.statusCurrent(node, t, now) {
		return true
	}
	if !t.notReady {
		lease, err := k.currentLease(node.Name)
		if err != nil || lease == nil || lease.Spec.RenewTime == nil || now.Sub(lease.Spec.RenewTime.Time) >= k.opts.RenewInterval {
			return true
		}
		pods, _ := k.pods.ByIndex(podNodeIndex, node.Name)
		for _, o := range pods {
			if p := o.(*corev1.Pod); p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodPending || p.Status.Phase == "" {
				return true
			}
		}
	}
	return false
}

// faultCovers reports whether a node fault's scope includes an instance.
func faultCovers(f *api.Fault, inst *api.Instance) bool {
	for _, id := range f.InstanceIDs {
		if id == inst.InstanceID {
			return true
		}
	}
	if len(f.Tags) == 0 {
		return false
	}
	for key, v := range f.Tags {
		if hv, ok := inst.Tags[key]; !ok || (v != "*" && hv != v) {
			return false
		}
	}
	return true
}
