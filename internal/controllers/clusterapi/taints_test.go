package clusterapi_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/capitest"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/machine"
	"github.com/machina-dev/machina/internal/testenv"
)

// machineTaints are the taints testMachineProvisions gives its Machine: one kept on the Node
// (Always), one put there once (OnInitialization).
var machineTaints = []clusterv1.MachineTaint{
	{Key: "example.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule, Propagation: clusterv1.MachineTaintPropagationAlways},
	{Key: "example.com/warmup", Effect: corev1.TaintEffectPreferNoSchedule, Propagation: clusterv1.MachineTaintPropagationOnInitialization},
}

// nodeTaints lists the Node's taints as key=value:effect.
func nodeTaints(n *corev1.Node) []string {
	out := make([]string, 0, len(n.Spec.Taints))
	for _, t := range n.Spec.Taints {
		out = append(out, fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect))
	}
	return out
}

// waitNodeTaints waits until the Node has every taint of want and none of gone.
func waitNodeTaints(t *testing.T, e *testenv.Env, name, what string, want, gone []string) *corev1.Node {
	t.Helper()
	node := &corev1.Node{}
	e.Eventually(30*time.Second, "Node "+name+": "+what, func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			return false, err.Error(), nil
		}
		have := nodeTaints(node)
		ok := !slices.ContainsFunc(want, func(s string) bool { return !slices.Contains(have, s) }) &&
			!slices.ContainsFunc(gone, func(s string) bool { return slices.Contains(have, s) })
		return ok, fmt.Sprintf("taints %v annotation %q", have, node.Annotations[machine.TaintsFromMachineAnnotation]), nil
	})
	return node
}

// checkNodeTaints follows the taints of Machine m (created with machineTaints) on its Node:
// both reach it; a taint somebody else puts on the Node and the OnInitialization one stay
// when the Machine drops its taints, the Always one goes.
func checkNodeTaints(t *testing.T, e *testenv.Env, m, node string) {
	t.Helper()
	gpu, warmup, user := "example.com/gpu=true:NoSchedule", "example.com/warmup=:PreferNoSchedule", "example.com/user=x:NoSchedule"
	n := waitNodeTaints(t, e, node, "the Machine's taints", []string{gpu, warmup}, nil)
	if got := n.Annotations[machine.TaintsFromMachineAnnotation]; got != "example.com/gpu:NoSchedule" {
		t.Errorf("%s %q, want only the Always taint", machine.TaintsFromMachineAnnotation, got)
	}
	capitest.Patch(t, e, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "example.com/user", Value: "x", Effect: corev1.TaintEffectNoSchedule})
	})
	patchMachine(t, e, m, func(m *clusterv1.Machine) { m.Spec.Taints = nil })
	waitNodeTaints(t, e, node, "the Always taint removed, the others kept", []string{warmup, user}, []string{gpu})
	time.Sleep(time.Second)
	waitNodeTaints(t, e, node, "still so", []string{warmup, user}, []string{gpu})
}
