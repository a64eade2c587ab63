package nodelink

import (
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/machina-dev/machina/internal/controllers/machineapi/machine"
)

func TestApplyMachine(t *testing.T) {
	m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m"},
		Spec: machinev1beta1.MachineSpec{
			ObjectMeta: machinev1beta1.ObjectMeta{Labels: map[string]string{"team": "blue"},
				Annotations: map[string]string{"owner": "team-blue", machine.NodeMachineAnnotation: "ns/other"}},
			Taints: []corev1.Taint{
				{Key: "dedicated", Value: "blue", Effect: corev1.TaintEffectNoSchedule},
				{Key: "dedicated", Value: "blue", Effect: corev1.TaintEffectNoExecute},
			}}}
	node := &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "dedicated", Value: "red", Effect: corev1.TaintEffectNoSchedule}}}}
	if !applyMachine(node, m) {
		t.Fatal("no change reported")
	}
	want := []corev1.Taint{
		{Key: "dedicated", Value: "red", Effect: corev1.TaintEffectNoSchedule},
		{Key: "dedicated", Value: "blue", Effect: corev1.TaintEffectNoExecute},
	}
	if len(node.Spec.Taints) != len(want) || node.Spec.Taints[0] != want[0] || node.Spec.Taints[1] != want[1] {
		t.Errorf("taints %v, want %v (one per key and effect)", node.Spec.Taints, want)
	}
	if node.Labels["team"] != "blue" || node.Annotations["owner"] != "team-blue" || node.Annotations[machine.NodeMachineAnnotation] != "ns/m" {
		t.Errorf("labels %v annotations %v", node.Labels, node.Annotations)
	}
	if applyMachine(node, m) {
		t.Error("a second pass changed the Node again")
	}
}
