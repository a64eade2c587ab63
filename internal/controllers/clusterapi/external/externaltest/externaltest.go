// Package externaltest is a provider kind for unit tests of code that reads provider objects
// through external.Resolver without an API server: FooMachine, served at v1beta1, which its
// CustomResourceDefinition declares to follow the v1beta2 contract.
package externaltest

import (
	"context"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// GVK is the kind's version.
var GVK = schema.GroupVersionKind{Group: "infrastructure.example.com", Version: "v1beta1", Kind: "FooMachine"}

// Kit is what a Resolver over the kind needs: a scheme that knows CRDs, a RESTMapper that
// knows the kind, and the kind's CRD (to put in the client the Resolver reads CRDs from).
type Kit struct {
	Scheme *runtime.Scheme
	Mapper meta.RESTMapper
	CRD    *apiextensionsv1.CustomResourceDefinition
}

// New builds the kit.
func New(t *testing.T) Kit {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{GVK.GroupVersion()})
	mapper.Add(GVK, meta.RESTScopeNamespace)
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "foomachines." + GVK.Group,
		Labels: map[string]string{clusterv1.GroupVersion.Group + "/v1beta2": GVK.Version}}}
	crd.Spec.Group = GVK.Group
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{{Name: GVK.Version, Served: true}}
	return Kit{Scheme: scheme, Mapper: mapper, CRD: crd}
}

// Object is a FooMachine called name in namespace "ns".
func Object(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(GVK)
	u.SetNamespace("ns")
	u.SetName(name)
	return u
}

// Ref references the FooMachine called name.
func Ref(name string) clusterv1.ContractVersionedObjectReference {
	return clusterv1.ContractVersionedObjectReference{APIGroup: GVK.Group, Kind: GVK.Kind, Name: name}
}

// Store is a fake client of the kit's scheme holding objs: the CRD for a Resolver's Reader,
// FooMachines for a cache or an API server.
func (k Kit) Store(objs ...client.Object) client.Client {
	return fake.NewClientBuilder().WithScheme(k.Scheme).WithObjects(objs...).Build()
}

// CountingReader counts the Gets that pass through it.
type CountingReader struct {
	client.Reader
	Gets int
}

// Get counts the read and passes it on.
func (r *CountingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.Gets++
	return r.Reader.Get(ctx, key, obj, opts...)
}
