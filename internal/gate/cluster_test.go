package gate_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/scheme"
)

// Cluster returns the named Cluster; nil and no error when the name is empty or the Cluster
// does not exist; and any other read error, naming the Cluster.
func TestCluster(t *testing.T) {
	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "prod"}}
	gets := 0
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(cl).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			gets++
			if key.Name == "forbidden" {
				return apierrors.NewForbidden(schema.GroupResource{Group: clusterv1.GroupVersion.Group, Resource: "clusters"}, key.Name, nil)
			}
			return c.Get(ctx, key, obj, opts...)
		}}).Build()
	ctx := context.Background()

	if got, err := gate.Cluster(ctx, c, "ns", "prod"); err != nil || got == nil || got.Name != "prod" {
		t.Errorf("existing Cluster: %v, %v", got, err)
	}
	if got, err := gate.Cluster(ctx, c, "ns", "gone"); err != nil || got != nil {
		t.Errorf("missing Cluster: %v, %v; want nil, nil", got, err)
	}
	before := gets
	if got, err := gate.Cluster(ctx, c, "ns", ""); err != nil || got != nil || gets != before {
		t.Errorf("no name: %v, %v after %d reads; want nil, nil without a read", got, err, gets-before)
	}
	got, err := gate.Cluster(ctx, c, "ns", "forbidden")
	if got != nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "ns/forbidden") {
		t.Errorf("refused read: %v, %v; want the Forbidden error naming ns/forbidden", got, err)
	}
}
