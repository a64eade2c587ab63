package machinepool

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/machina-dev/machina/internal/scheme"
)

// A pool name too long for a label value is hashed exactly as Cluster API does (providers
// and the autoscaler select by this label), and an object labelled with the hash maps back
// to its pool, not to another pool of the namespace.
func TestLongPoolNameLabel(t *testing.T) {
	long := "pool-" + strings.Repeat("p", 64)
	pools := []*clusterv1.MachinePool{
		{ObjectMeta: metav1.ObjectMeta{Name: long, Namespace: "ns"}, Spec: clusterv1.MachinePoolSpec{ClusterName: "c"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "short", Namespace: "ns"}, Spec: clusterv1.MachinePoolSpec{ClusterName: "c"}},
	}
	const want = "hash_kixm6g_z" // Cluster API's format.MustFormatValue of the long name
	if got := poolLabels(pools[0])[clusterv1.MachinePoolNameLabel]; got != want {
		t.Fatalf("pool-name label %q, want %q", got, want)
	}
	r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(pools[0], pools[1]).Build()}
	for value, pool := range map[string]string{want: long, "short": "short"} {
		o := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m",
			Labels: map[string]string{clusterv1.MachinePoolNameLabel: value, clusterv1.ClusterNameLabel: "c"}}}
		got := r.labelledToPool(context.Background(), o)
		if len(got) != 1 || got[0] != (reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: pool}}) {
			t.Errorf("label %q maps to %v, want pool %s", value, got, pool)
		}
	}
}
