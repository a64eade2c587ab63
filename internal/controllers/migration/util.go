package migration

import (
	"context"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/sync/synccommon"
	"github.com/machina-dev/machina/internal/provider"
)

type (
	metav1Condition = metav1.Condition
	eventRecorder   = record.EventRecorder
)

// isNil reports whether an interface holds a nil pointer.
func isNil(o any) bool {
	v := reflect.ValueOf(o)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// infraMetadata reads the metadata of the infrastructure object ref names in ns, as the kind
// kindOf picks from the platform providing ref's kind. It returns nil and no error when no
// platform provides the kind (the sync never mirrored it either) or the object is gone.
func infraMetadata(ctx context.Context, c client.Reader, reg *provider.Registry, ns string, ref clusterv1.ContractVersionedObjectReference,
	kindOf func(provider.Provider) schema.GroupVersionKind) (*metav1.PartialObjectMetadata, provider.Provider, error) {
	p, err := reg.ForRef(ref)
	if err != nil {
		return nil, provider.Provider{}, nil
	}
	obj := synccommon.Metadata(kindOf(p))
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, obj); err != nil {
		return nil, p, client.IgnoreNotFound(err)
	}
	return obj, p, nil
}
