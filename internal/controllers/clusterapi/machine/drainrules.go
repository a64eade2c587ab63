package machine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/drain"
)

// podRule is one spec.pods entry of a MachineDrainRule, its selectors parsed.
type podRule struct {
	pods, namespaces labels.Selector
}

// drainRule is a MachineDrainRule that applies to the Machine being drained.
type drainRule struct {
	name     string
	behavior clusterv1.MachineDrainRuleDrainBehavior
	order    int32
	pods     []podRule // empty: every pod
}

// drainClassifier decides each pod's drain behaviour for Machine m, as Cluster API does: the
// pod label cluster.x-k8s.io/drain first (skip, wait-completed), then the first
// MachineDrainRule of the Machine's namespace, by name, whose machine and pod selectors
// match; otherwise Drain with order 0. A rule with an invalid selector or behaviour stops the
// drain with an error naming the rule and the field. Namespaces are read from the workload
// cluster only when a rule that applies has a namespaceSelector.
func (r *Reconciler) drainClassifier(ctx context.Context, wc client.Reader, m *clusterv1.Machine, cluster *clusterv1.Cluster) (drain.Classifier, error) {
	var list clusterv1.MachineDrainRuleList
	if err := r.Client.List(ctx, &list, client.InNamespace(m.Namespace)); err != nil {
		return nil, fmt.Errorf("listing MachineDrainRules: %w", err)
	}
	rules, err := applicableRules(list.Items, m, cluster)
	if err != nil {
		return nil, err
	}
	namespaces := map[string]labels.Set{}
	if needNamespaces(rules) {
		var nsList corev1.NamespaceList
		if err := wc.List(ctx, &nsList); err != nil {
			return nil, fmt.Errorf("listing Namespaces for MachineDrainRules: %w", err)
		}
		for _, ns := range nsList.Items {
			namespaces[ns.Name] = labels.Set(ns.Labels)
		}
	}
	return classifier(rules, namespaces), nil
}

// applicableRules checks every MachineDrainRule and returns, sorted by name, those that apply
// to the Machine.
func applicableRules(items []clusterv1.MachineDrainRule, m *clusterv1.Machine, cluster *clusterv1.Cluster) ([]drainRule, error) {
	items = slices.Clone(items)
	slices.SortFunc(items, func(a, b clusterv1.MachineDrainRule) int { return strings.Compare(a.Name, b.Name) })
	var rules []drainRule
	for i := range items {
		rule, applies, err := parseDrainRule(&items[i], m, cluster)
		if err != nil {
			return nil, err
		}
		if applies {
			rules = append(rules, rule)
		}
	}
	return rules, nil
}

// needNamespaces reports whether any rule selects pods by their Namespace's labels.
func needNamespaces(rules []drainRule) bool {
	for _, rule := range rules {
		for _, p := range rule.pods {
			if !p.namespaces.Empty() {
				return true
			}
		}
	}
	return false
}

// classifier applies the pod label, then the rules (in order), then the default Drain, order 0.
// namespaces holds the workload cluster's Namespace labels by name.
func classifier(rules []drainRule, namespaces map[string]labels.Set) drain.Classifier {
	return func(pod *corev1.Pod) (drain.Rule, error) {
		if rule, ok := podLabelRule(pod); ok {
			return rule, nil
		}
		for _, rule := range rules {
			if rule.matches(pod, namespaces) {
				return drain.Rule{Behavior: drain.Behavior(rule.behavior), Order: rule.order}, nil
			}
		}
		return drain.Rule{Behavior: drain.BehaviorDrain}, nil
	}
}

// podLabelRule reads the cluster.x-k8s.io/drain label: skip or wait-completed (case and the
// dash do not matter, as upstream reads it). Other values are ignored.
func podLabelRule(pod *corev1.Pod) (drain.Rule, bool) {
	v, ok := pod.Labels[clusterv1.PodDrainLabel]
	if !ok {
		return drain.Rule{}, false
	}
	switch {
	case strings.EqualFold(v, string(clusterv1.MachineDrainRuleDrainBehaviorSkip)):
		return drain.Rule{Behavior: drain.BehaviorSkip}, true
	case strings.EqualFold(strings.Replace(v, "-", "", 1), string(clusterv1.MachineDrainRuleDrainBehaviorWaitCompleted)):
		return drain.Rule{Behavior: drain.BehaviorWaitCompleted}, true
	}
	return drain.Rule{}, false
}

// parseDrainRule checks a MachineDrainRule's selectors and reports whether it applies to
// the Machine: no spec.machines, or one entry whose selector matches the Machine and whose
// clusterSelector matches its Cluster.
func parseDrainRule(mdr *clusterv1.MachineDrainRule, m *clusterv1.Machine, cluster *clusterv1.Cluster) (drainRule, bool, error) {
	rule := drainRule{name: mdr.Name, behavior: mdr.Spec.Drain.Behavior, order: ptr.Deref(mdr.Spec.Drain.Order, 0)}
	switch rule.behavior {
	case clusterv1.MachineDrainRuleDrainBehaviorDrain, clusterv1.MachineDrainRuleDrainBehaviorSkip, clusterv1.MachineDrainRuleDrainBehaviorWaitCompleted:
	default:
		return rule, false, fmt.Errorf("MachineDrainRule %s: spec.drain.behavior: unsupported value %q (Drain, Skip or WaitCompleted)", mdr.Name, rule.behavior)
	}
	applies := len(mdr.Spec.Machines) == 0
	for i, ms := range mdr.Spec.Machines {
		machineSel, err := selector(mdr.Name, fmt.Sprintf("spec.machines[%d].selector", i), ms.Selector)
		if err != nil {
			return rule, false, err
		}
		clusterSel, err := selector(mdr.Name, fmt.Sprintf("spec.machines[%d].clusterSelector", i), ms.ClusterSelector)
		if err != nil {
			return rule, false, err
		}
		var clusterLabels labels.Set
		if cluster != nil {
			clusterLabels = cluster.Labels
		}
		applies = applies || (machineSel.Matches(labels.Set(m.Labels)) && clusterSel.Matches(clusterLabels))
	}
	for i, ps := range mdr.Spec.Pods {
		podSel, err := selector(mdr.Name, fmt.Sprintf("spec.pods[%d].selector", i), ps.Selector)
		if err != nil {
			return rule, false, err
		}
		nsSel, err := selector(mdr.Name, fmt.Sprintf("spec.pods[%d].namespaceSelector", i), ps.NamespaceSelector)
		if err != nil {
			return rule, false, err
		}
		rule.pods = append(rule.pods, podRule{pods: podSel, namespaces: nsSel})
	}
	return rule, applies, nil
}

// selector parses a label selector; nil or empty selects everything.
func selector(rule, field string, ls *metav1.LabelSelector) (labels.Selector, error) {
	if ls == nil {
		return labels.Everything(), nil
	}
	s, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return nil, fmt.Errorf("MachineDrainRule %s: %s: %w", rule, field, err)
	}
	return s, nil
}

// matches reports whether the rule selects the pod (and the pod's Namespace).
func (d drainRule) matches(pod *corev1.Pod, namespaces map[string]labels.Set) bool {
	if len(d.pods) == 0 {
		return true
	}
	for _, p := range d.pods {
		if p.pods.Matches(labels.Set(pod.Labels)) && p.namespaces.Matches(namespaces[pod.Namespace]) {
			return true
		}
	}
	return false
}
