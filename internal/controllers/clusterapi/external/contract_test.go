package external

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func crd(labels map[string]string, served ...string) *apiextensionsv1.CustomResourceDefinition {
	c := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "foomachines.infrastructure.example.com", Labels: labels}}
	c.Spec.Group = "infrastructure.example.com"
	for _, v := range []string{"v1alpha1", "v1alpha2", "v1beta1", "v1"} {
		c.Spec.Versions = append(c.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: v, Served: contains(served, v)})
	}
	return c
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestResolveCRD(t *testing.T) {
	for _, tc := range []struct {
		name     string
		labels   map[string]string
		served   []string
		version  string
		contract Contract
		err      bool
	}{
		{"v1beta2 contract, highest served version", map[string]string{"cluster.x-k8s.io/v1beta2": "v1alpha2_v1beta1_v1alpha1"},
			[]string{"v1alpha1", "v1alpha2", "v1beta1"}, "v1beta1", ContractV1Beta2, false},
		{"unserved versions are skipped", map[string]string{"cluster.x-k8s.io/v1beta2": "v1alpha2_v1beta1"},
			[]string{"v1alpha2"}, "v1alpha2", ContractV1Beta2, false},
		{"v1beta2 preferred over v1beta1", map[string]string{"cluster.x-k8s.io/v1beta1": "v1alpha1", "cluster.x-k8s.io/v1beta2": "v1"},
			[]string{"v1alpha1", "v1"}, "v1", ContractV1Beta2, false},
		{"v1beta1 contract", map[string]string{"cluster.x-k8s.io/v1beta1": "v1alpha1"},
			[]string{"v1alpha1"}, "v1alpha1", ContractV1Beta1, false},
		{"no contract label", map[string]string{"app": "x"}, []string{"v1"}, "", "", true},
		{"label names no served version", map[string]string{"cluster.x-k8s.io/v1beta2": "v9"}, []string{"v1"}, "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveCRD(crd(tc.labels, tc.served...), "FooMachine")
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if err == nil && (got.GVK.Version != tc.version || got.Contract != tc.contract || got.GVK.Kind != "FooMachine") {
				t.Errorf("got %+v, want version %s contract %s", got, tc.version, tc.contract)
			}
		})
	}
}

func TestObjectFields(t *testing.T) {
	v1 := &Object{Unstructured: &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"providerID": "x://1", "failureDomain": "fd-spec"},
		"status": map[string]any{"ready": true, "failureReason": "CreateError", "failureMessage": "boom",
			"initialization": map[string]any{"provisioned": false},
			"addresses":      []any{map[string]any{"type": "InternalIP", "address": "10.0.0.1"}, map[string]any{"type": "", "address": "x"}},
			"conditions":     []any{map[string]any{"type": "Ready", "status": "False", "reason": "Old"}},
			"v1beta2":        map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "New"}}},
		}}}, Contract: ContractV1Beta1}
	if !v1.Provisioned("provisioned") || v1.ProviderID() != "x://1" || v1.FailureDomain() != "fd-spec" {
		t.Errorf("v1beta1 provisioned %v providerID %q fd %q", v1.Provisioned("provisioned"), v1.ProviderID(), v1.FailureDomain())
	}
	if r, m := v1.Failure(); r != "CreateError" || m != "boom" {
		t.Errorf("failure %q %q", r, m)
	}
	if a := v1.Addresses(); len(a) != 1 || a[0].Address != "10.0.0.1" {
		t.Errorf("addresses %v", a)
	}
	if c := v1.Condition("Ready"); c == nil || c.Reason != "New" {
		t.Errorf("v1beta1 provider's v1beta2 conditions should win: %+v", c)
	}

	v2 := &Object{Unstructured: v1.DeepCopy(), Contract: ContractV1Beta2}
	if v2.Provisioned("provisioned") {
		t.Error("v1beta2 contract reads status.initialization.provisioned, not status.ready")
	}
	if r, m := v2.Failure(); r != "" || m != "" {
		t.Errorf("the v1beta2 contract has no failureReason: %q %q", r, m)
	}
	if c := v2.Condition("Ready"); c == nil || c.Reason != "Old" {
		t.Errorf("v1beta2 condition: %+v", c)
	}
}
