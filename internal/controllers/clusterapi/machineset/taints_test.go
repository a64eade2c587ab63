package machineset_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ct "github.com/machina-dev/machina/internal/controllers/clusterapi/internal/capitest"
	"github.com/machina-dev/machina/internal/testenv"
)

func gpuTaint(value string) clusterv1.MachineTaint {
	return clusterv1.MachineTaint{Key: "example.com/gpu", Value: value, Effect: corev1.TaintEffectNoSchedule,
		Propagation: clusterv1.MachineTaintPropagationAlways}
}

// waitTaints waits until the MachineSet's only Machine, still the one named first, has the
// taints want and its Node the taint gpu=nodeValue:NoSchedule ("" for none).
func waitTaints(t *testing.T, e *testenv.Env, ms *clusterv1.MachineSet, first string, want []clusterv1.MachineTaint, nodeValue string) {
	t.Helper()
	e.Eventually(time.Minute, fmt.Sprintf("taints %v on the Machine, gpu=%q on its Node", want, nodeValue), func(ctx context.Context) (bool, string, error) {
		machines, err := ct.Machines(ctx, e, ms)
		if err != nil || len(machines) != 1 {
			return false, fmt.Sprintf("%d Machines %v", len(machines), err), nil
		}
		m := machines[0]
		node := &corev1.Node{}
		if err := e.Client.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, node); err != nil {
			return false, err.Error(), nil
		}
		got := ""
		for _, tt := range node.Spec.Taints {
			if tt.Key == "example.com/gpu" && tt.Effect == corev1.TaintEffectNoSchedule {
				got = "=" + tt.Value
			}
		}
		wantNode := ""
		if nodeValue != "" {
			wantNode = "=" + nodeValue
		}
		return m.Name == first && equality.Semantic.DeepEqual(m.Spec.Taints, want) && got == wantNode,
			fmt.Sprintf("Machine %s taints %v, Node gpu%q", m.Name, m.Spec.Taints, got), nil
	})
}

// Template taints are in-place fields: they reach the existing Machine (and through it its
// Node) when added, changed or dropped, without replacing it or making it not up to date.
func testTemplateTaints(t *testing.T) {
	e := env.For(t)
	ms := ct.MachineSet("ms-taints", 1, "small")
	ms.Spec.Template.Spec.Taints = []clusterv1.MachineTaint{gpuTaint("true")}
	if err := e.Client.Create(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	first := ct.WaitRunning(t, e, ms, 1, 90*time.Second)[0].Name
	waitTaints(t, e, ms, first, []clusterv1.MachineTaint{gpuTaint("true")}, "true")

	ct.PatchMachineSet(t, e, ms, func(ms *clusterv1.MachineSet) { ms.Spec.Template.Spec.Taints[0].Value = "false" })
	waitTaints(t, e, ms, first, []clusterv1.MachineTaint{gpuTaint("false")}, "false")
	ct.PatchMachineSet(t, e, ms, func(ms *clusterv1.MachineSet) { ms.Spec.Template.Spec.Taints = nil })
	waitTaints(t, e, ms, first, nil, "")
	waitStatus(t, e, ms, "the Machine up to date", func(ms *clusterv1.MachineSet) bool {
		return counts(ms, 1, 1, 1, 1) && ms.Status.ObservedGeneration == ms.Generation
	})
	ct.Scale(t, e, ms, 0)
	ct.WaitRunning(t, e, ms, 0, 60*time.Second)
}
