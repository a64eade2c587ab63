// Package remote gives the Cluster API controllers a client for a Cluster's workload cluster,
// built from the kubeconfig stored, as Cluster API stores it, in the Secret
// <cluster>-kubeconfig under the key "value", and a Node cache per workload cluster.
//
// One Clients serves every controller of the manager. It is a manager.Runnable: the Node
// caches run on the manager's context and stop with it, and Start returns only once they
// have. Clients are rebuilt when the Secret changes, and a Cluster's client and Node cache
// are dropped once the Cluster is gone (SetupWithManager watches Clusters for that).
package remote

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/cachetrim"
	"github.com/machina-dev/machina/internal/scheme"
)

// KubeconfigKey is the key of the kubeconfig in the Secret.
const KubeconfigKey = "value"

// SecretName is the name of the Secret holding the kubeconfig of cluster.
func SecretName(cluster string) string { return cluster + "-kubeconfig" }

// ProviderIDIndex indexes the Node cache by spec.providerID.
const ProviderIDIndex = "spec.providerID"

// ErrNoKubeconfig is wrapped by errors about a missing or empty kubeconfig Secret.
var ErrNoKubeconfig = errors.New("no kubeconfig")

// ErrStopped is returned once the manager running the Clients has stopped.
var ErrStopped = errors.New("workload cluster clients are stopped")

// Clients builds and caches workload-cluster clients, one per Cluster.
type Clients struct {
	// Reader reads the kubeconfig Secrets and the Clusters.
	Reader client.Reader
	// Timeout of each request to a workload cluster; 10s when zero.
	Timeout time.Duration

	started chan struct{} // closed by Start
	mu      sync.Mutex
	ctx     context.Context // Start's; parent of every Node cache
	stopped bool
	clients map[client.ObjectKey]*entry // by Cluster
	running map[client.ObjectKey]int    // Node caches whose Start has not returned
	wg      sync.WaitGroup              // one per Node cache goroutine
}

type entry struct {
	resourceVersion string // of the Secret the client was built from
	client          client.Client
	cfg             *rest.Config
	nodes           cache.Cache // started on first use
	stop            context.CancelFunc
}

// New returns Clients reading Secrets and Clusters through reader. Add it to the manager
// (SetupWithManager) before use.
func New(reader client.Reader) *Clients {
	return &Clients{Reader: reader, started: make(chan struct{}),
		clients: map[client.ObjectKey]*entry{}, running: map[client.ObjectKey]int{}}
}

// Start runs until ctx ends, then stops every Node cache and waits for them to stop.
func (c *Clients) Start(ctx context.Context) error {
	c.mu.Lock()
	c.ctx = ctx
	c.mu.Unlock()
	close(c.started)
	<-ctx.Done()
	c.mu.Lock()
	c.stopped = true
	for key := range c.clients {
		c.forgetLocked(key)
	}
	c.mu.Unlock()
	c.wg.Wait()
	return nil
}

// NeedLeaderElection is false: the Clients must run before the controllers that use them.
func (c *Clients) NeedLeaderElection() bool { return false }

// Running lists the Clusters whose Node cache is running (or still stopping), sorted.
func (c *Clients) Running() []client.ObjectKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]client.ObjectKey, 0, len(c.running))
	for k := range c.running {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b client.ObjectKey) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// Forget drops the client and stops the Node cache of the Cluster namespace/name.
func (c *Clients) Forget(namespace, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetLocked(client.ObjectKey{Namespace: namespace, Name: name})
}

func (c *Clients) forgetLocked(key client.ObjectKey) {
	if e, ok := c.clients[key]; ok && e.stop != nil {
		e.stop()
	}
	delete(c.clients, key)
}

// waitStarted waits for Start, so that Node caches run on the manager's context.
func (c *Clients) waitStarted(ctx context.Context) error {
	select {
	case <-c.started:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the workload cluster clients to start: %w", ctx.Err())
	}
}

// Nodes returns a cached reader of the workload cluster's Nodes, indexed by ProviderIDIndex,
// so finding a Machine's Node does not list every Node of the cluster on every pass.
func (c *Clients) Nodes(ctx context.Context, namespace, name string) (client.Reader, error) {
	if err := c.waitStarted(ctx); err != nil {
		return nil, err
	}
	if _, err := c.Client(ctx, namespace, name); err != nil {
		return nil, err
	}
	key := client.ObjectKey{Namespace: namespace, Name: name}
	nc, err := c.nodeCache(ctx, key)
	if err != nil {
		return nil, err
	}
	syncCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if !nc.WaitForCacheSync(syncCtx) {
		return nil, fmt.Errorf("the Node cache of cluster %s did not sync", key)
	}
	return nc, nil
}

// nodeCache returns the Cluster's Node cache, starting it on first use.
func (c *Clients) nodeCache(ctx context.Context, key client.ObjectKey) (cache.Cache, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.clients[key]
	switch {
	case c.stopped:
		return nil, ErrStopped
	case !ok:
		return nil, fmt.Errorf("the client of cluster %s was dropped meanwhile", key)
	case e.nodes != nil:
		return e.nodes, nil
	}
	// Timeout bounds single requests. On the cache's own config it would also bound its
	// informer's list and every watch: each watch cut after Timeout, and once the cluster's
	// Nodes take longer than that to list (5,000 Nodes on a busy API server) a relist never
	// completes and the cache stays stale for good. The informer bounds its watches itself.
	// Nodes are all it serves, so it needs no discovery (which, unbounded, could hold c.mu
	// as long as an unresponsive API server keeps a connection open).
	cfg := rest.CopyConfig(e.cfg)
	cfg.Timeout = 0
	nc, err := cache.New(cfg, cache.Options{Scheme: scheme.Scheme, Mapper: nodeMapper(),
		ByObject: map[client.Object]cache.ByObject{&corev1.Node{}: {Transform: cachetrim.Node}}, ReaderFailOnMissingInformer: true})
	if err != nil {
		return nil, err
	}
	if err := nc.IndexField(ctx, &corev1.Node{}, ProviderIDIndex, func(o client.Object) []string {
		if pid := o.(*corev1.Node).Spec.ProviderID; pid != "" {
			return []string{pid}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if _, err := nc.GetInformer(ctx, &corev1.Node{}); err != nil {
		return nil, err
	}
	runCtx, stop := context.WithCancel(c.ctx)
	e.nodes, e.stop = nc, stop
	c.running[key]++
	c.wg.Go(func() {
		_ = nc.Start(runCtx) // returns once its informers have stopped
		c.mu.Lock()
		if c.running[key]--; c.running[key] == 0 {
			delete(c.running, key)
		}
		c.mu.Unlock()
	})
	return nc, nil
}

// nodeMapper maps the one kind a Node cache serves, without asking the API server.
func nodeMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(corev1.SchemeGroupVersion.WithKind("Node"), meta.RESTScopeRoot)
	return m
}

// Client returns a client of the workload cluster of the Cluster namespace/name. Its reads
// are not cached: every Get or List goes to the workload cluster's apiserver.
func (c *Clients) Client(ctx context.Context, namespace, name string) (client.Client, error) {
	var s corev1.Secret
	skey := client.ObjectKey{Namespace: namespace, Name: SecretName(name)}
	if err := c.Reader.Get(ctx, skey, &s); err != nil {
		return nil, fmt.Errorf("%w: reading Secret %s: %v", ErrNoKubeconfig, skey, err)
	}
	key := client.ObjectKey{Namespace: namespace, Name: name}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.clients[key]; ok && e.resourceVersion == s.ResourceVersion {
		return e.client, nil
	}
	if c.stopped {
		return nil, ErrStopped
	}
	cfg, cl, err := c.build(&s)
	if err != nil {
		return nil, err
	}
	// Checked under the lock that Forget takes: a Cluster deleted before this point is seen
	// gone here, one deleted after it is forgotten by the Cluster watch.
	if err := c.Reader.Get(ctx, key, &clusterv1.Cluster{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("cluster %s is gone", key)
		}
		return nil, err
	}
	c.forgetLocked(key) // the kubeconfig changed: the old Node cache goes with it
	c.clients[key] = &entry{resourceVersion: s.ResourceVersion, client: cl, cfg: cfg}
	return cl, nil
}

// build makes a client from the kubeconfig Secret s.
func (c *Clients) build(s *corev1.Secret) (*rest.Config, client.Client, error) {
	key := client.ObjectKeyFromObject(s)
	data := s.Data[KubeconfigKey]
	if len(data) == 0 {
		return nil, nil, fmt.Errorf("%w: Secret %s has no %q key", ErrNoKubeconfig, key, KubeconfigKey)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, nil, fmt.Errorf("secret %s: %w", key, err)
	}
	cfg.Timeout = c.Timeout
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	cfg.QPS, cfg.Burst = 200, 400
	cl, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return nil, nil, fmt.Errorf("building a client from Secret %s: %w", key, err)
	}
	return cfg, cl, nil
}
