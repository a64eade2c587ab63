package migration

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// What acknowledges a pause on an InfraMachine: its Paused condition when it has one; without
// one, nothing is needed if its provider never acted on it, and otherwise only the removal of
// the provider's acknowledgement annotation, for a provider that declares one.
func TestPausedConditionAcknowledgements(t *testing.T) {
	const ack = "clusterctl.cluster.x-k8s.io/block-move"
	infra := func(marked bool, conds ...map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"kind": "AzureMachine", "metadata": map[string]any{"name": "m", "generation": int64(2)}}}
		if marked {
			u.SetAnnotations(map[string]string{ack: "true"})
		}
		if len(conds) > 0 {
			list := make([]any, len(conds))
			for i, c := range conds {
				list[i] = c
			}
			_ = unstructured.SetNestedSlice(u.Object, list, "status", "conditions")
		}
		return u
	}
	paused := func(status string, gen int64) map[string]any {
		return map[string]any{"type": "Paused", "status": status, "observedGeneration": gen}
	}
	cases := []struct {
		name          string
		u             *unstructured.Unstructured
		acted         bool
		ackAnnotation string
		want          bool
		why           string
	}{
		{"condition True", infra(true, paused("True", 2)), true, ack, true, ""},
		{"condition False wins over a removed annotation", infra(false, paused("False", 2)), true, ack, false, "does not report Paused=True"},
		{"condition of an older generation", infra(false, paused("True", 1)), true, ack, false, "generation 1, not 2"},
		{"never acted on", infra(false), false, "", true, ""},
		{"acted on, no way to acknowledge", infra(false), true, "", false, "no Paused condition"},
		{"acted on, annotation still there", infra(true), true, ack, false, "still carries " + ack},
		{"acted on, annotation removed", infra(false), true, ack, true, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ok, why, err := pausedCondition(c.u, c.acted, c.ackAnnotation)
			if err != nil || ok != c.want || !strings.Contains(why, c.why) {
				t.Fatalf("pausedCondition = %v, %q, %v; want %v, %q", ok, why, err, c.want, c.why)
			}
		})
	}
}
