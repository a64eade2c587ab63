package machine

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/machina-dev/machina/internal/scheme"
)

// A Node the Machine controller has not annotated yet (just registered) is mapped to its
// Machine by spec.providerID; an annotated one by its annotations; one of no Machine to none.
func TestNodeToMachine(t *testing.T) {
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m"}, Spec: clusterv1.MachineSpec{ProviderID: "sim://a"}}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(m).WithIndex(&clusterv1.Machine{}, providerIDIndex, machineProviderID).Build()
	r := &Reconciler{Client: c}
	node := func(pid string, annotations map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: annotations}, Spec: corev1.NodeSpec{ProviderID: pid}}
	}
	for _, tc := range []struct {
		name string
		node *corev1.Node
		want string
	}{
		{"new Node, by providerID", node("sim://a", nil), "ns/m"},
		{"annotated Node", node("sim://other", map[string]string{MachineAnnotation: "x", ClusterNamespaceAnnotation: "ns2"}), "ns2/x"},
		{"no Machine has its providerID", node("sim://b", nil), ""},
		{"no providerID", node("", nil), ""},
	} {
		got := r.nodeToMachine(context.Background(), tc.node)
		switch {
		case tc.want == "" && len(got) != 0, tc.want != "" && (len(got) != 1 || got[0].String() != tc.want):
			t.Errorf("%s: got %v, want %q", tc.name, got, tc.want)
		}
	}
}
