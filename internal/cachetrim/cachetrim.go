// Package cachetrim holds the informer-cache transforms, beyond controller-runtime's
// stripping of managedFields, that drop what no controller of machina reads, so that a cache
// of thousands of objects stays small. Each keeps every field a reader of the cache uses; a
// write built from a trimmed copy must be a patch of the fields it changes (or, for a Node,
// an Update of its metadata and spec, which never touches its status).
package cachetrim

import (
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Node drops a Node's managedFields and the container images its kubelet reports
// (status.images): no controller reads them, and on a real cluster's Nodes they are most of
// the object (tens of images, each with its digests).
func Node(o any) (any, error) {
	if n, ok := o.(*corev1.Node); ok {
		n.ManagedFields = nil
		n.Status.Images = nil
	}
	return o, nil
}

// CRD keeps of a CustomResourceDefinition its names, labels and versions without their
// schemas: the Cluster API controllers read the contract labels and served versions of the
// provider CRDs, and one provider's schemas (CAPA's) are megabytes.
func CRD(o any) (any, error) {
	crd, ok := o.(*apiextensionsv1.CustomResourceDefinition)
	if !ok {
		return o, nil
	}
	crd.ManagedFields = nil
	crd.Annotations = nil // kubectl's last-applied-configuration repeats the whole CRD
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		v.Schema, v.AdditionalPrinterColumns, v.SelectableFields = nil, nil, nil
	}
	crd.Spec.Conversion = nil
	crd.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
	return crd, nil
}
