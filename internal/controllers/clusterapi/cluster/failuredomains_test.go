package cluster

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/external"
)

func TestFailureDomains(t *testing.T) {
	// v1beta2 contract: a list.
	v2 := &external.Object{Contract: external.ContractV1Beta2, Unstructured: &unstructured.Unstructured{Object: map[string]any{
		"status": map[string]any{"failureDomains": []any{
			map[string]any{"name": "b", "controlPlane": false},
			map[string]any{"name": "a", "controlPlane": true, "attributes": map[string]any{"rack": "r1"}},
		}}}}}
	got := failureDomains(v2)
	if len(got) != 2 || got[0].Name != "a" || !*got[0].ControlPlane || got[0].Attributes["rack"] != "r1" || *got[1].ControlPlane {
		t.Errorf("v1beta2 failure domains: %+v", got)
	}
	// v1beta1 contract: a map keyed by name.
	v1 := &external.Object{Contract: external.ContractV1Beta1, Unstructured: &unstructured.Unstructured{Object: map[string]any{
		"status": map[string]any{"failureDomains": map[string]any{
			"z2": map[string]any{"controlPlane": true},
			"z1": map[string]any{},
		}}}}}
	got = failureDomains(v1)
	if len(got) != 2 || got[0].Name != "z1" || got[0].ControlPlane != nil || got[1].Name != "z2" || !*got[1].ControlPlane {
		t.Errorf("v1beta1 failure domains: %+v", got)
	}
	if failureDomains(&external.Object{Unstructured: &unstructured.Unstructured{Object: map[string]any{}}}) != nil {
		t.Error("no failureDomains should give nil")
	}
}
