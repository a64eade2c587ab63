package authority

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/provider"
)

// InfraMetadata reads the metadata of the infrastructure object ref names in ns, as the kind
// kindOf picks from the platform providing ref's kind. It returns nil and no error when no
// platform provides the kind (the sync never mirrored it either) or the object is gone.
func InfraMetadata(ctx context.Context, c client.Reader, reg *provider.Registry, ns string, ref clusterv1.ContractVersionedObjectReference,
	kindOf func(provider.Provider) schema.GroupVersionKind) (*metav1.PartialObjectMetadata, provider.Provider, error) {
	p, err := reg.ForRef(ref)
	if err != nil {
		return nil, provider.Provider{}, nil
	}
	obj := Metadata(kindOf(p))
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, obj); err != nil {
		return nil, p, client.IgnoreNotFound(err)
	}
	return obj, p, nil
}

// Metadata returns an empty metadata-only object of kind gvk, for watches, reads and patches
// of provider objects whose Go types the core does not use.
func Metadata(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	return m
}

// MetadataList returns an empty metadata-only list of kind gvk.
func MetadataList(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	return l
}
