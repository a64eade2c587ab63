package machine

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// TaintsFromMachineAnnotation lists (comma-separated, sorted, "key:effect") the Node taints
// the Machine keeps there: its taints with propagation Always. A taint dropped from the
// Machine is removed from the Node only when the list names it, so taints others put on the
// Node stay. The annotation being there at all means the Node got its OnInitialization taints
// already: they are added once, while it is absent.
const TaintsFromMachineAnnotation = clusterv1.TaintsFromMachineAnnotation

// syncTaints brings the Machine's taints onto the Node as the Cluster API does with its
// MachineTaintPropagation feature:
//   - Always taints are added, or their value corrected, on every pass, and recorded in
//     TaintsFromMachineAnnotation;
//   - OnInitialization taints are added only while the Node has no such annotation yet, and
//     never removed;
//   - a recorded taint the Machine no longer lists as Always is removed, unless the Machine
//     still lists it as OnInitialization;
//   - every other taint of the Node is left as it is.
//
// A taint is known by its key and effect. It reports whether the Node changed.
func syncTaints(node *corev1.Node, taints []clusterv1.MachineTaint) bool {
	recorded, initialized := node.Annotations[TaintsFromMachineAnnotation]
	always := map[string]bool{}
	onInit := map[string]bool{}
	changed := false
	for _, t := range taints {
		switch t.Propagation {
		case clusterv1.MachineTaintPropagationAlways:
			always[taintID(t.Key, t.Effect)] = true
		case clusterv1.MachineTaintPropagationOnInitialization:
			onInit[taintID(t.Key, t.Effect)] = true
			if initialized {
				continue
			}
		default:
			continue // the API requires a propagation: nothing to go by
		}
		changed = ensureTaint(node, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect}) || changed
	}
	for _, id := range splitList(recorded) {
		if !always[id] && !onInit[id] {
			changed = removeTaint(node, id) || changed
		}
	}
	ids := make([]string, 0, len(always))
	for id := range always {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if want := strings.Join(ids, ","); !initialized || want != recorded {
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		node.Annotations[TaintsFromMachineAnnotation] = want
		changed = true
	}
	return changed
}

func taintID(key string, effect corev1.TaintEffect) string { return key + ":" + string(effect) }

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// ensureTaint puts t on the Node, replacing the value of a taint with its key and effect.
func ensureTaint(node *corev1.Node, t corev1.Taint) bool {
	for i := range node.Spec.Taints {
		cur := &node.Spec.Taints[i]
		if cur.Key != t.Key || cur.Effect != t.Effect {
			continue
		}
		if cur.Value == t.Value {
			return false
		}
		cur.Value = t.Value
		return true
	}
	node.Spec.Taints = append(node.Spec.Taints, t)
	return true
}

// removeTaint removes the Node's taint with the key:effect id.
func removeTaint(node *corev1.Node, id string) bool {
	n := len(node.Spec.Taints)
	node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool {
		return taintID(t.Key, t.Effect) == id
	})
	return len(node.Spec.Taints) != n
}
