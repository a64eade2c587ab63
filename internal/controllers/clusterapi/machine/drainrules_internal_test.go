package machine

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/machina-dev/machina/internal/drain"
)

func mdr(name string, behavior clusterv1.MachineDrainRuleDrainBehavior, order *int32,
	machines []clusterv1.MachineDrainRuleMachineSelector, pods []clusterv1.MachineDrainRulePodSelector) clusterv1.MachineDrainRule {
	return clusterv1.MachineDrainRule{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: clusterv1.MachineDrainRuleSpec{Drain: clusterv1.MachineDrainRuleDrainConfig{Behavior: behavior, Order: order},
			Machines: machines, Pods: pods}}
}

func sel(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func pod(ns string, kv ...string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns, Labels: sel(kv...).MatchLabels}}
}

// The classifier follows Cluster API's precedence: the pod label, then the first applicable
// MachineDrainRule by name whose pod and namespace selectors match, then Drain at order 0.
// Rules whose machine or cluster selector does not match the Machine are ignored.
func TestDrainRulesPrecedenceAndSelectors(t *testing.T) {
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"pool": "gpu"}}}
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"env": "prod"}}}
	items := []clusterv1.MachineDrainRule{
		// Listed out of name order: "a-" must still win over "b-" for the same pod.
		mdr("b-drain-late", clusterv1.MachineDrainRuleDrainBehaviorDrain, ptr.To[int32](5), nil,
			[]clusterv1.MachineDrainRulePodSelector{{Selector: sel("app", "db")}}),
		mdr("a-wait-db-in-data", clusterv1.MachineDrainRuleDrainBehaviorWaitCompleted, nil, nil,
			[]clusterv1.MachineDrainRulePodSelector{{Selector: sel("app", "db"), NamespaceSelector: sel("tier", "data")}}),
		mdr("c-skip-other-pool", clusterv1.MachineDrainRuleDrainBehaviorSkip, nil,
			[]clusterv1.MachineDrainRuleMachineSelector{{Selector: sel("pool", "cpu")}}, nil),
		mdr("d-skip-other-cluster", clusterv1.MachineDrainRuleDrainBehaviorSkip, nil,
			[]clusterv1.MachineDrainRuleMachineSelector{{Selector: sel("pool", "gpu"), ClusterSelector: sel("env", "dev")}}, nil),
		mdr("e-first-gpu-prod", clusterv1.MachineDrainRuleDrainBehaviorDrain, ptr.To[int32](-3),
			[]clusterv1.MachineDrainRuleMachineSelector{{Selector: sel("pool", "other")}, {Selector: sel("pool", "gpu"), ClusterSelector: sel("env", "prod")}},
			[]clusterv1.MachineDrainRulePodSelector{{Selector: sel("app", "web")}}),
	}
	rules, err := applicableRules(items, m, cluster)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rules {
		names = append(names, r.name)
	}
	if got := strings.Join(names, ","); got != "a-wait-db-in-data,b-drain-late,e-first-gpu-prod" {
		t.Fatalf("applicable rules = %s, want the rules for this Machine and Cluster sorted by name", got)
	}
	if !needNamespaces(rules) {
		t.Error("a rule with a namespaceSelector applies: Namespaces must be read")
	}
	classify := classifier(rules, map[string]labels.Set{"data": {"tier": "data"}, "web": {"tier": "web"}})
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want drain.Rule
	}{
		{"namespace selector matches", pod("data", "app", "db"), drain.Rule{Behavior: drain.BehaviorWaitCompleted}},
		{"namespace selector does not match: next rule", pod("web", "app", "db"), drain.Rule{Behavior: drain.BehaviorDrain, Order: 5}},
		{"machine selector with a second entry matching", pod("web", "app", "web"), drain.Rule{Behavior: drain.BehaviorDrain, Order: -3}},
		{"no rule matches", pod("web", "app", "cache"), drain.Rule{Behavior: drain.BehaviorDrain}},
		{"label skip beats rules", pod("data", "app", "db", clusterv1.PodDrainLabel, "Skip"), drain.Rule{Behavior: drain.BehaviorSkip}},
		{"label wait-completed", pod("web", "app", "web", clusterv1.PodDrainLabel, "wait-completed"), drain.Rule{Behavior: drain.BehaviorWaitCompleted}},
		{"unknown label value ignored", pod("web", "app", "web", clusterv1.PodDrainLabel, "never"), drain.Rule{Behavior: drain.BehaviorDrain, Order: -3}},
	} {
		got, err := classify(tc.pod)
		if err != nil || got != tc.want {
			t.Errorf("%s: got %+v (%v), want %+v", tc.name, got, err, tc.want)
		}
	}
}

// A rule that cannot be evaluated stops the drain with an error naming the rule and field;
// rules without a namespaceSelector need no Namespace reads.
func TestDrainRulesBadInputNamesRuleAndField(t *testing.T) {
	m := &clusterv1.Machine{}
	bad := mdr("bad-selector", clusterv1.MachineDrainRuleDrainBehaviorDrain, nil, nil,
		[]clusterv1.MachineDrainRulePodSelector{{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: "Near", Values: []string{"x"}}}}}})
	_, err := applicableRules([]clusterv1.MachineDrainRule{bad}, m, nil)
	if err == nil || !strings.Contains(err.Error(), "MachineDrainRule bad-selector: spec.pods[0].namespaceSelector") {
		t.Errorf("invalid selector: error %v, want one naming the rule and spec.pods[0].namespaceSelector", err)
	}
	unknown := mdr("bad-behavior", "Evict", nil, nil, nil)
	_, err = applicableRules([]clusterv1.MachineDrainRule{unknown}, m, nil)
	if err == nil || !strings.Contains(err.Error(), "MachineDrainRule bad-behavior: spec.drain.behavior") {
		t.Errorf("unknown behaviour: error %v, want one naming the rule and spec.drain.behavior", err)
	}
	rules, err := applicableRules([]clusterv1.MachineDrainRule{mdr("all", clusterv1.MachineDrainRuleDrainBehaviorSkip, nil, nil,
		[]clusterv1.MachineDrainRulePodSelector{{Selector: sel("app", "x")}})}, m, nil)
	if err != nil || len(rules) != 1 || needNamespaces(rules) {
		t.Errorf("rule without namespaceSelector: %v, %d rules, needNamespaces %v", err, len(rules), needNamespaces(rules))
	}
}
