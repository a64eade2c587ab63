package remote_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/remote"
	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/lab/labtest"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/scheme"
)

const ns = "default"

// One Clients in a manager running as the lab's controllers do: a Node cache starts for each
// Cluster on first use, is stopped when its Cluster is deleted, and every one stops with the
// manager, which returns only once no informer goroutine is left.
func TestNodeCachesFollowClustersAndManager(t *testing.T) {
	t.Parallel()
	l := labtest.Start(t)
	admin, err := client.New(l.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := l.ManagerConfig()
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := manager.New(cfg, manager.Options{MetricsAddr: "0", HealthProbeAddr: "0"})
	if err != nil {
		t.Fatal(err)
	}
	clients := remote.New(mgr.GetClient())
	if err := clients.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()

	kubeconfig, err := os.ReadFile(l.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"one", "two"} {
		newCluster(t, admin, name, kubeconfig)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{ProviderID: "sim://r/z/i-1"}}
	if err := admin.Create(ctx, node); err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{"one", "two"} {
		waitFor(t, "the Node of Cluster "+name+" by providerID", func(ctx context.Context) (bool, string) {
			nodes, err := clients.Nodes(ctx, ns, name)
			if err != nil {
				return false, err.Error()
			}
			var list corev1.NodeList
			if err := nodes.List(ctx, &list, client.MatchingFields{remote.ProviderIDIndex: "sim://r/z/i-1"}); err != nil {
				return false, err.Error()
			}
			return len(list.Items) == 1 && list.Items[0].Name == "n1", fmt.Sprintf("%d Nodes", len(list.Items))
		})
	}
	if got := clients.Running(); !slices.Equal(got, keys("one", "two")) {
		t.Fatalf("running Node caches %v, want Clusters one and two", got)
	}
	if n := informerGoroutines(); n == 0 {
		t.Fatal("no informer goroutine found while Node caches run: the leak check below would prove nothing")
	}

	if err := admin.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "one"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the Node cache of the deleted Cluster stopped", func(context.Context) (bool, string) {
		got := clients.Running()
		return slices.Equal(got, keys("two")), fmt.Sprintf("running %v", got)
	})
	// Its kubeconfig Secret outlives it (garbage collection is not running here): a late
	// caller still gets no client and starts no cache for the deleted Cluster.
	if _, err := clients.Nodes(ctx, ns, "one"); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Errorf("Nodes of the deleted Cluster: err %v, want it reported gone", err)
	}
	if got := clients.Running(); !slices.Equal(got, keys("two")) {
		t.Errorf("running Node caches %v after a late call, want only Cluster two", got)
	}

	stop()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("manager: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("manager did not stop within a minute")
	}
	if got := clients.Running(); len(got) != 0 {
		t.Errorf("running Node caches %v after the manager stopped, want none", got)
	}
	if _, err := clients.Nodes(context.Background(), ns, "two"); !errors.Is(err, remote.ErrStopped) {
		t.Errorf("Nodes after the manager stopped: err %v, want ErrStopped", err)
	}
	// Goroutines of a stopped informer may take a moment to return after Start did.
	waitFor(t, "no informer goroutine left", func(context.Context) (bool, string) {
		n := informerGoroutines()
		return n == 0, fmt.Sprintf("%d informer goroutines", n)
	})
}

// Timeout bounds single requests to a workload cluster, not the Node cache's list and
// watches: behind a proxy slower than Timeout, the cache still fills and keeps following
// the cluster's Nodes. (Bound by it, at 5,000 Nodes on a busy API server a relist outlasted
// the 10-s default every time and the cache stayed stale for good.)
func TestNodeCacheIsNotBoundByTheRequestTimeout(t *testing.T) {
	t.Parallel()
	l := labtest.Start(t)
	admin, err := client.New(l.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	clients := remote.New(admin)
	clients.Timeout = 50 * time.Millisecond
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { _ = clients.Start(ctx) }()
	newCluster(t, admin, "busy", slowKubeconfig(t, l.KubeconfigPath, 150*time.Millisecond))
	for i, pid := range []string{"sim://r/z/i-before", "sim://r/z/i-after"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i)}, Spec: corev1.NodeSpec{ProviderID: pid}}
		if err := admin.Create(ctx, node); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "Node "+pid+" in the Node cache", func(ctx context.Context) (bool, string) {
			nodes, err := clients.Nodes(ctx, ns, "busy")
			if err != nil {
				return false, err.Error()
			}
			var list corev1.NodeList
			if err := nodes.List(ctx, &list, client.MatchingFields{remote.ProviderIDIndex: pid}); err != nil {
				return false, err.Error()
			}
			return len(list.Items) == 1, fmt.Sprintf("%d Nodes", len(list.Items))
		})
	}
}

// slowKubeconfig returns the kubeconfig at path pointed at a lab proxy in front of its API
// server that holds back every chunk, either way, for delay.
func slowKubeconfig(t *testing.T, path string, delay time.Duration) []byte {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		u, err := url.Parse(c.Server)
		if err != nil {
			t.Fatal(err)
		}
		p, err := lab.NewProxy(u.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		p.SetDelay(delay)
		u.Host = p.Addr()
		c.Server = u.String()
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func newCluster(t *testing.T, c client.Client, name string, kubeconfig []byte) {
	t.Helper()
	ctx := context.Background()
	for _, o := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: remote.SecretName(name), Namespace: ns,
			Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
			Type: clusterv1.ClusterSecretType, Data: map[string][]byte{remote.KubeconfigKey: kubeconfig}},
		// No controller acts on the Cluster here; its spec only has to be valid.
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "SimCluster", Name: name}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

func keys(names ...string) []client.ObjectKey {
	out := make([]client.ObjectKey, len(names))
	for i, n := range names {
		out[i] = client.ObjectKey{Namespace: ns, Name: n}
	}
	return out
}

// informerGoroutines counts goroutines running a client-go informer or its reflector.
func informerGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "k8s.io/client-go/tools/cache.(*sharedIndexInformer).Run") ||
			strings.Contains(g, "k8s.io/client-go/tools/cache.(*Reflector)") {
			count++
		}
	}
	return count
}

func waitFor(t *testing.T, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true,
		func(context.Context) (bool, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			ok, desc := cond(ctx)
			last = desc
			return ok, nil
		})
	if err != nil {
		t.Fatalf("%s: not within a minute (last seen: %s)", what, last)
	}
}
