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
	"k8s.io/client-go/tools/clientcmd"
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
	cfg.QPS, cfg.Burst = 50, 100
	cl, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return nil, fmt.Errorf("building a client from Secret %s: %w", key, err)
	}
	if c.clients == nil {
		c.clients = map[client.ObjectKey]entry{}
	}
	c.clients[key] = entry{resourceVersion: s.ResourceVersion, client: cl}
	return cl, nil
}
