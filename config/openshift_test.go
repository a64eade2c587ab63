package config_test

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// config/openshift is config/bridge moved into openshift-cluster-api: every object of bridge
// but its Namespace, each with every mention of machina-system (its namespace, a
// ServiceAccount subject's, the webhook Service the manager names, the manager's identity in
// the admission policies) now openshift-cluster-api, and nothing else changed. So a change to
// bridge that the overlay does not follow fails here.
func TestOpenShiftOverlayIsBridgeInOpenShiftClusterAPI(t *testing.T) {
	const from, to = "machina-system", "openshift-cluster-api"
	want := map[string]*unstructured.Unstructured{}
	for _, o := range renderDir(t, "bridge") {
		if o.GetKind() == "Namespace" {
			continue
		}
		moved := &unstructured.Unstructured{Object: replaceStrings(o.Object, from, to).(map[string]any)}
		want[id(moved)] = moved
	}
	got := map[string]*unstructured.Unstructured{}
	for _, o := range renderDir(t, "openshift") {
		if o.GetKind() == "Namespace" {
			t.Errorf("config/openshift creates Namespace %s: openshift-cluster-api belongs to OpenShift", o.GetName())
		}
		b, _ := json.Marshal(o.Object)
		if strings.Contains(string(b), from) {
			t.Errorf("config/openshift: %s still mentions %s", id(o), from)
		}
		got[id(o)] = o
	}
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("config/openshift lacks %s", k)
		case !equality.Semantic.DeepEqual(g.Object, w.Object):
			gb, _ := json.MarshalIndent(g.Object, "", " ")
			wb, _ := json.MarshalIndent(w.Object, "", " ")
			t.Errorf("config/openshift: %s differs from bridge's moved to %s:\n got %s\nwant %s", k, to, gb, wb)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("config/openshift has %s, which bridge has not", k)
		}
	}
	if len(got) == 0 {
		t.Fatal("config/openshift renders nothing")
	}
}

func id(o *unstructured.Unstructured) string {
	return o.GroupVersionKind().GroupKind().String() + " " + o.GetNamespace() + "/" + o.GetName()
}

// replaceStrings returns v with from replaced by to in every string value.
func replaceStrings(v any, from, to string) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = replaceStrings(e, from, to)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = replaceStrings(e, from, to)
		}
		return out
	case string:
		return strings.ReplaceAll(x, from, to)
	}
	return v
}
