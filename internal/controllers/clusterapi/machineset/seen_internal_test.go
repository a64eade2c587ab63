package machineset

import (
	"context"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/external"
)

// A Machine whose InfraMachine a pass found, while the Machine controller had not reported
// on it yet, is not read again by later passes; once the Machine controller reports the
// InfraMachine missing, it is read again whatever was seen before.
func TestFinishCreationsReadsAFoundCloneOnce(t *testing.T) {
	ctx := context.Background()
	gvk := schema.GroupVersionKind{Group: "infrastructure.example.com", Version: "v1beta1", Kind: "FooMachine"}
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "foomachines.infrastructure.example.com",
		Labels: map[string]string{"cluster.x-k8s.io/v1beta2": "v1beta1"}}}
	crd.Spec.Group = gvk.Group
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1beta1", Served: true}}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{gvk.GroupVersion()})
	mapper.Add(gvk, meta.RESTScopeNamespace)
	infra := &unstructured.Unstructured{}
	infra.SetGroupVersionKind(gvk)
	infra.SetNamespace("ns")
	infra.SetName("m")
	cache := &countingReader{Reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(infra).Build()}
	live := &countingReader{Reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(infra).Build()}
	r := &Reconciler{Cache: cache, Reader: live,
		Resolver: &external.Resolver{Reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(crd).Build(), Mapper: mapper}}

	ms := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "set"}}
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", UID: "uid-m",
		CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour)),
		Annotations:       map[string]string{TemplateHashAnnotation: templateHash(ms)}},
		Spec: clusterv1.MachineSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: gvk.Group, Kind: gvk.Kind, Name: "m"}}}

	pass := func(want int) {
		t.Helper()
		if _, err := r.finishCreations(ctx, ms, []*clusterv1.Machine{m}); err != nil {
			t.Fatal(err)
		}
		if cache.gets != want || live.gets != 0 {
			t.Fatalf("reads from the cache %d, from the API server %d; want %d and 0", cache.gets, live.gets, want)
		}
	}
	pass(1) // not reported on yet: read
	pass(1) // found before: not read again
	m.Status.Conditions = []metav1.Condition{{Type: clusterv1.MachineInfrastructureReadyCondition, Status: metav1.ConditionFalse,
		Reason: clusterv1.MachineInfrastructureDoesNotExistReason}}
	pass(2) // reported missing: read again
	pass(3)
	m.Status.Conditions = nil
	r.seen.keep(client.ObjectKeyFromObject(ms), nil) // a new leader
	pass(4)
}

type countingReader struct {
	client.Reader
	gets int
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets++
	return r.Reader.Get(ctx, key, obj, opts...)
}
