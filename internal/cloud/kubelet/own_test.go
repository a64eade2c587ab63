package kubelet

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

func lease(name string, renew time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease},
		Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: renew}}}
}

func node(name, rv string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
}

// ownKubelet is a kubelet whose informers hold leases and nodes (what the indexers say).
func ownKubelet(t *testing.T) (*Kubelet, cache.Indexer, cache.Indexer) {
	t.Helper()
	li := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	ni := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	return &Kubelet{leases: coordlisters.NewLeaseLister(li), nodes: corelisters.NewNodeLister(ni),
		ownLeases: map[string]*coordinationv1.Lease{}, ownNodes: map[string]ownNode{}}, li, ni
}

// The kubelet works from the newer of its own last write and the informer's copy, and drops
// its own once the informer has caught up.
func TestOwnWritesUntilTheInformerCatchesUp(t *testing.T) {
	k, li, ni := ownKubelet(t)
	t0 := time.Now()
	k.wroteLease("n1", lease("n1", t0), nil)
	if l, _ := k.currentLease("n1"); l == nil || !l.Spec.RenewTime.Equal(&metav1.MicroTime{Time: t0}) {
		t.Fatalf("before the informer has it: %v", l)
	}
	if err := li.Add(lease("n1", t0.Add(-time.Second))); err != nil {
		t.Fatal(err)
	}
	if l, _ := k.currentLease("n1"); !l.Spec.RenewTime.Time.Equal(t0) {
		t.Fatalf("an older informer copy won: %v", l.Spec.RenewTime)
	}
	if err := li.Update(lease("n1", t0)); err != nil {
		t.Fatal(err)
	}
	if _, err := k.currentLease("n1"); err != nil || len(k.ownLeases) != 0 {
		t.Fatalf("caught up, own Leases kept: %v (%v)", k.ownLeases, err)
	}

	k.wroteNode("n1", node("n1", "12"), nil, t0)
	if n, ok, _ := k.currentNode("n1", t0.Add(time.Second)); !ok || n.ResourceVersion != "12" {
		t.Fatalf("registered Node the informer has not shown: %v %v", n, ok)
	}
	if _, ok, _ := k.currentNode("n1", t0.Add(ownNodeLag+time.Second)); ok || len(k.ownNodes) != 0 {
		t.Fatalf("a Node the informer never showed is still taken to exist after %v", ownNodeLag)
	}
	k.wroteNode("n1", node("n1", "12"), nil, t0)
	if err := ni.Add(node("n1", "9")); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := k.currentNode("n1", t0); n.ResourceVersion != "12" {
		t.Fatalf("an older informer copy won: %s", n.ResourceVersion)
	}
	if err := ni.Update(node("n1", "12")); err != nil {
		t.Fatal(err)
	}
	if _, _, _ = k.currentNode("n1", t0); len(k.ownNodes) != 0 {
		t.Fatalf("caught up, own Nodes kept: %v", k.ownNodes)
	}
}
