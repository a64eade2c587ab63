package machine

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

func always(key, value string, effect corev1.TaintEffect) clusterv1.MachineTaint {
	return clusterv1.MachineTaint{Key: key, Value: value, Effect: effect, Propagation: clusterv1.MachineTaintPropagationAlways}
}

func onInit(key, value string, effect corev1.TaintEffect) clusterv1.MachineTaint {
	return clusterv1.MachineTaint{Key: key, Value: value, Effect: effect, Propagation: clusterv1.MachineTaintPropagationOnInitialization}
}

// taintNode is a Node with taints "key=value:effect" and, unless recorded is nil, the
// tracking annotation.
func taintNode(recorded *string, taints ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{"other": "x"}}}
	if recorded != nil {
		n.Annotations[TaintsFromMachineAnnotation] = *recorded
	}
	for _, s := range taints {
		kv, effect, _ := strings.Cut(s, ":")
		k, v, _ := strings.Cut(kv, "=")
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)})
	}
	return n
}

func taintStrings(n *corev1.Node) []string {
	out := make([]string, 0, len(n.Spec.Taints))
	for _, t := range n.Spec.Taints {
		out = append(out, fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect))
	}
	slices.Sort(out)
	return out
}

func TestSyncTaints(t *testing.T) {
	none, gpu := "", "gpu:NoSchedule"
	for name, c := range map[string]struct {
		node       *corev1.Node
		taints     []clusterv1.MachineTaint
		want       []string // sorted key=value:effect
		annotation string
		changed    bool
	}{
		"new Node gets Always and OnInitialization taints, records only Always": {
			node:       taintNode(nil, "node.kubernetes.io/not-ready=:NoSchedule"),
			taints:     []clusterv1.MachineTaint{always("gpu", "true", "NoSchedule"), onInit("warmup", "", "NoExecute")},
			want:       []string{"gpu=true:NoSchedule", "node.kubernetes.io/not-ready=:NoSchedule", "warmup=:NoExecute"},
			annotation: "gpu:NoSchedule", changed: true,
		},
		"no taints still marks the Node initialized": {
			node: taintNode(nil), want: []string{}, annotation: "", changed: true,
		},
		"initialized Node gets no OnInitialization taint again": {
			node:   taintNode(&gpu, "gpu=true:NoSchedule"),
			taints: []clusterv1.MachineTaint{always("gpu", "true", "NoSchedule"), onInit("warmup", "", "NoExecute")},
			want:   []string{"gpu=true:NoSchedule"}, annotation: "gpu:NoSchedule",
		},
		"Always taint removed from the Node comes back": {
			node:   taintNode(&gpu),
			taints: []clusterv1.MachineTaint{always("gpu", "true", "NoSchedule")},
			want:   []string{"gpu=true:NoSchedule"}, annotation: "gpu:NoSchedule", changed: true,
		},
		"changed value is corrected": {
			node:   taintNode(&gpu, "gpu=false:NoSchedule", "other=v:NoSchedule"),
			taints: []clusterv1.MachineTaint{always("gpu", "true", "NoSchedule")},
			want:   []string{"gpu=true:NoSchedule", "other=v:NoSchedule"}, annotation: "gpu:NoSchedule", changed: true,
		},
		"dropped Always taint goes, others' taints and same key with another effect stay": {
			node:   taintNode(&gpu, "gpu=true:NoSchedule", "gpu=true:NoExecute", "team=red:PreferNoSchedule"),
			taints: nil,
			want:   []string{"gpu=true:NoExecute", "team=red:PreferNoSchedule"}, annotation: "", changed: true,
		},
		"Always turned OnInitialization stays on the Node, no longer recorded": {
			node:   taintNode(&gpu, "gpu=true:NoSchedule"),
			taints: []clusterv1.MachineTaint{onInit("gpu", "true", "NoSchedule")},
			want:   []string{"gpu=true:NoSchedule"}, annotation: "", changed: true,
		},
		"OnInitialization turned Always is added and recorded": {
			node:   taintNode(&none),
			taints: []clusterv1.MachineTaint{always("warmup", "", "NoExecute")},
			want:   []string{"warmup=:NoExecute"}, annotation: "warmup:NoExecute", changed: true,
		},
		"a taint the Machine never set is not removed for matching no record": {
			node:   taintNode(&none, "gpu=true:NoSchedule"),
			taints: nil,
			want:   []string{"gpu=true:NoSchedule"}, annotation: "",
		},
	} {
		t.Run(name, func(t *testing.T) {
			changed := syncTaints(c.node, c.taints)
			if got := taintStrings(c.node); !slices.Equal(got, c.want) {
				t.Errorf("taints %v, want %v", got, c.want)
			}
			if got, ok := c.node.Annotations[TaintsFromMachineAnnotation]; !ok || got != c.annotation {
				t.Errorf("annotation %q (present %v), want %q", got, ok, c.annotation)
			}
			if c.node.Annotations["other"] != "x" {
				t.Errorf("other annotations touched: %v", c.node.Annotations)
			}
			if changed != c.changed {
				t.Errorf("changed %v, want %v", changed, c.changed)
			}
		})
	}
}

// The annotation lists the Always taints sorted, whatever their order on the Machine, so
// reordering them on the Machine writes nothing.
func TestSyncTaintsRecordsSorted(t *testing.T) {
	n := taintNode(nil)
	syncTaints(n, []clusterv1.MachineTaint{always("z", "", "NoSchedule"), always("a", "", "NoExecute")})
	if got := n.Annotations[TaintsFromMachineAnnotation]; got != "a:NoExecute,z:NoSchedule" {
		t.Errorf("annotation %q", got)
	}
	if syncTaints(n, []clusterv1.MachineTaint{always("a", "", "NoExecute"), always("z", "", "NoSchedule")}) {
		t.Errorf("reordered taints changed the Node")
	}
}
