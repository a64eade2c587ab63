package migration

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/machina-dev/machina/internal/authority"
)

// What acknowledges a pause on an InfraMachine: its Paused condition when it has one; without
// one, nothing is needed if its provider never acted on it, and otherwise only the removal of
// the provider's acknowledgement annotation, for a provider that declares one, or, for a
// provider with no way to acknowledge, an operator's machina.dev/provider-paused.
func TestPausedConditionAcknowledgements(t *testing.T) {
	const ack = "clusterctl.cluster.x-k8s.io/block-move"
	annotated := func(key string, conds ...map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"kind": "AzureMachine", "metadata": map[string]any{"name": "m", "generation": int64(2)}}}
		if key != "" {
			u.SetAnnotations(map[string]string{key: "true"})
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
	infra := func(marked bool, conds ...map[string]any) *unstructured.Unstructured {
		if marked {
			return annotated(ack, conds...)
		}
		return annotated("", conds...)
	}
	operator := authority.ProviderPausedAnnotation
	both := infra(true)
	both.SetAnnotations(map[string]string{ack: "true", operator: ""})
	paused := func(status string, gen int64) map[string]any {
		return map[string]any{"type": "Paused", "status": status, "observedGeneration": gen}
	}
	cases := []struct {
		name          string
		u             *unstructured.Unstructured
		acted         bool
		ackAnnotation string
		byOperator    bool
		want          bool
		why           string
	}{
		{"condition True", infra(true, paused("True", 2)), true, ack, false, true, ""},
		{"condition False wins over a removed annotation", infra(false, paused("False", 2)), true, ack, false, false, "does not report Paused=True"},
		{"condition of an older generation", infra(false, paused("True", 1)), true, ack, false, false, "generation 1, not 2"},
		{"never acted on", infra(false), false, "", false, true, ""},
		{"acted on, condition not written yet", infra(false), true, "", false, false, "no Paused condition yet"},
		{"acted on, annotation still there", infra(true), true, ack, false, false, "still carries " + ack},
		{"acted on, annotation removed", infra(false), true, ack, false, true, ""},
		{"acted on, no way to acknowledge: the message says what to do", infra(false), true, "", true, false, "annotate it " + operator},
		{"acted on, no way to acknowledge, an operator acknowledged", annotated(operator), true, "", true, true, ""},
		{"an operator's acknowledgement counts only where the provider gives none", annotated(operator), true, "", false, false, "no Paused condition yet"},
		{"an operator does not overrule the provider's annotation", both, true, ack, false, false, "still carries " + ack},
		{"an operator does not overrule a condition", annotated(operator, paused("False", 2)), true, "", true, false, "does not report Paused=True"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ok, why, err := pausedCondition(c.u, c.acted, c.ackAnnotation, c.byOperator)
			if err != nil || ok != c.want || !strings.Contains(why, c.why) {
				t.Fatalf("pausedCondition = %v, %q, %v; want %v, %q", ok, why, err, c.want, c.why)
			}
		})
	}
}
