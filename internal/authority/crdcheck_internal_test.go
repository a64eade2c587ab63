package authority

import (
	"context"
	"errors"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// flakyCRDs answers Gets of CRDs: the first failures with err, then a CRD declaring every
// authority field (or notFound).
type flakyCRDs struct {
	client.Reader
	failures, calls int
	err             error
	notFound        bool
}

func (f *flakyCRDs) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	f.calls++
	if f.calls <= f.failures {
		return f.err
	}
	if f.notFound {
		return apierrors.NewNotFound(schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, key.Name)
	}
	props := func(names ...string) map[string]apiextensionsv1.JSONSchemaProps {
		m := map[string]apiextensionsv1.JSONSchemaProps{}
		for _, n := range names {
			m[n] = apiextensionsv1.JSONSchemaProps{}
		}
		return m
	}
	crd := obj.(*apiextensionsv1.CustomResourceDefinition)
	crd.Name = key.Name
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1beta1", Served: true, Schema: &apiextensionsv1.CustomResourceValidation{
		OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec":   {Properties: props("authoritativeAPI")},
			"status": {Properties: props("authoritativeAPI", "synchronizedGeneration", "synchronizedAPI")},
		}}}}}
	return nil
}

// The check rides out an API server that resets its connections (the soak saw a replica
// exit at setup with "reading CRD machines.machine.openshift.io: ... EOF" just after an API
// server restart); an answer — not found — is final at once.
func TestCheckMachineAPICRDsWaitsForTheAPIServer(t *testing.T) {
	reset := errors.New(`Get "https://127.0.0.1:40237/apis/apiextensions.k8s.io/v1/customresourcedefinitions/machines.machine.openshift.io": EOF`)
	f := &flakyCRDs{failures: 3, err: reset}
	if err := CheckMachineAPICRDs(context.Background(), f); err != nil || f.calls != 3+len(authorityCRDs) {
		t.Fatalf("after 3 resets: %v after %d reads; want success after %d", err, f.calls, 3+len(authorityCRDs))
	}
	f = &flakyCRDs{notFound: true}
	if err := CheckMachineAPICRDs(context.Background(), f); err == nil || f.calls != 1 {
		t.Fatalf("CRD not installed: %v after %d reads; want the error after 1", err, f.calls)
	}
	f = &flakyCRDs{failures: 1000, err: reset}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := CheckMachineAPICRDs(ctx, f); !errors.Is(err, reset) {
		t.Fatalf("API server away past the deadline: %v; want its error", err)
	}
}
