package external

import (
	"context"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// A Pass resolves each kind once, however many objects of it are read; a new Pass resolves
// again (a CRD's contract labels may have changed between passes).
func TestPassResolvesEachKindOnce(t *testing.T) {
	ctx := context.Background()
	gvk := schema.GroupVersionKind{Group: "infrastructure.example.com", Version: "v1beta1", Kind: "FooMachine"}
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var objects []*unstructured.Unstructured
	for _, name := range []string{"a", "b", "c"} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace("ns")
		u.SetName(name)
		objects = append(objects, u)
	}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{gvk.GroupVersion()})
	mapper.Add(gvk, meta.RESTScopeNamespace)
	crds := &countingReader{Reader: fake.NewClientBuilder().WithScheme(scheme).
		WithObjects(crd(map[string]string{"cluster.x-k8s.io/v1beta2": "v1beta1"}, "v1beta1")).Build()}
	res := &Resolver{Reader: crds, Mapper: mapper}
	store := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objects[0], objects[1], objects[2]).Build()

	for round := 1; round <= 2; round++ {
		pass := res.Pass()
		for _, name := range []string{"a", "b", "c", "a"} {
			ref := clusterv1.ContractVersionedObjectReference{APIGroup: gvk.Group, Kind: gvk.Kind, Name: name}
			o, err := pass.Get(ctx, store, ref, "ns")
			if err != nil || o.GetName() != name || o.Contract != ContractV1Beta2 || o.GroupVersionKind() != gvk {
				t.Fatalf("pass %d, Get %s: %v, %v", round, name, o, err)
			}
		}
		if crds.gets != round {
			t.Fatalf("after %d passes of 4 reads of one kind: %d CRD reads, want %d", round, crds.gets, round)
		}
	}
}
