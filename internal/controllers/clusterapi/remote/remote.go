// Package remote gives the Cluster API controllers a client for a Cluster's workload cluster,
// built from the kubeconfig stored, as Cluster API stores it, in the Secret
// <cluster>-kubeconfig under the key "value". Clients are kept per Cluster and rebuilt when
// the Secret changes.
package remote

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/scheme"
)

// KubeconfigKey is the key of the kubeconfig in the Secret.
const KubeconfigKey = "value"

// SecretName is the name of the Secret holding the kubeconfig of cluster.
func SecretName(cluster string) string { return cluster + "-kubeconfig" }

// Clients builds and caches workload-cluster clients. Reader reads the kubeconfig Secrets.
type Clients struct {
	Reader client.Reader
	// Timeout of each request to a workload cluster; 10s when zero.
	Timeout time.Duration

	mu      sync.Mutex
	clients map[client.ObjectKey]entry
}

type entry struct {
	resourceVersion string
	client          client.Client
	cfg             *rest.Config
	nodes           cache.Cache // started on first use; stopped when the Secret changes
	stop            context.CancelFunc
}

// ProviderIDIndex indexes the Node cache by spec.providerID.
const ProviderIDIndex = "spec.providerID"

// Nodes returns a cached reader of the workload cluster's Nodes, indexed by ProviderIDIndex,
// so finding a Machine's Node does not list every Node of the cluster on every pass.
func (c *Clients) Nodes(ctx context.Context, namespace, name string) (client.Reader, error) {
	if _, err := c.Client(ctx, namespace, name); err != nil {
		return nil, err
	}
	key := client.ObjectKey{Namespace: namespace, Name: SecretName(name)}
	c.mu.Lock()
	e := c.clients[key]
	if e.nodes != nil {
		c.mu.Unlock()
		return e.nodes, nil
	}
	nc, err := cache.New(e.cfg, cache.Options{Scheme: scheme.Scheme,
		ByObject: map[client.Object]cache.ByObject{&corev1.Node{}: {}}, ReaderFailOnMissingInformer: true})
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	if err := nc.IndexField(ctx, &corev1.Node{}, ProviderIDIndex, func(o client.Object) []string {
		if pid := o.(*corev1.Node).Spec.ProviderID; pid != "" {
			return []string{pid}
		}
		return nil
	}); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	if _, err := nc.GetInformer(ctx, &corev1.Node{}); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	runCtx, stop := context.WithCancel(context.Background())
	go func() { _ = nc.Start(runCtx) }()
	e.nodes, e.stop = nc, stop
	c.clients[key] = e
	c.mu.Unlock()
	syncCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if !nc.WaitForCacheSync(syncCtx) {
		return nil, fmt.Errorf("the Node cache of cluster %s/%s did not sync", namespace, name)
	}
	return nc, nil
}

// ErrNoKubeconfig is wrapped by errors about a missing or empty kubeconfig Secret.
var ErrNoKubeconfig = fmt.Errorf("no kubeconfig")

// Client returns a client of the workload cluster of the Cluster namespace/name. Its reads
// are not cached: every Get or List goes to the workload cluster's apiserver.
func (c *Clients) Client(ctx context.Context, namespace, name string) (client.Client, error) {
	var s corev1.Secret
	key := client.ObjectKey{Namespace: namespace, Name: SecretName(name)}
	if err := c.Reader.Get(ctx, key, &s); err != nil {
		return nil, fmt.Errorf("%w: reading Secret %s: %v", ErrNoKubeconfig, key, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.clients[key]; ok && e.resourceVersion == s.ResourceVersion {
		return e.client, nil
	}
	data := s.Data[KubeconfigKey]
	if len(data) == 0 {
		return nil, fmt.Errorf("%w: Secret %s has no %q key", ErrNoKubeconfig, key, KubeconfigKey)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, fmt.Errorf("Secret %s: %w", key, err)
	}
	cfg.Timeout = c.Timeout
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	cfg.QPS, cfg.Burst = 200, 400
	cl, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return nil, fmt.Errorf("building a client from Secret %s: %w", key, err)
	}
	if c.clients == nil {
		c.clients = map[client.ObjectKey]entry{}
	}
	if old, ok := c.clients[key]; ok && old.stop != nil {
		old.stop() // the kubeconfig changed: the old Node cache goes with it
	}
	c.clients[key] = entry{resourceVersion: s.ResourceVersion, client: cl, cfg: cfg}
	return cl, nil
}
