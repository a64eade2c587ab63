package gate_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/machina-dev/machina/internal/gate"
)

func TestNodeChanged(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC))
	base := func() *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: "1", Labels: map[string]string{"a": "b"},
				Annotations: map[string]string{"machine.openshift.io/machine": "ns/m"}},
			Spec: corev1.NodeSpec{ProviderID: "sim:///sim-east-1a/i-1"},
			Status: corev1.NodeStatus{
				Conditions: []corev1.NodeCondition{
					{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: t0, LastTransitionTime: t0},
					{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: t0, LastTransitionTime: t0},
				},
				Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
			},
		}
	}
	later := metav1.NewTime(t0.Add(time.Minute))
	cases := []struct {
		name   string
		change func(n *corev1.Node)
		want   bool
	}{
		{"nothing", func(*corev1.Node) {}, false},
		{"a heartbeat", func(n *corev1.Node) {
			n.ResourceVersion = "2"
			for i := range n.Status.Conditions {
				n.Status.Conditions[i].LastHeartbeatTime = later
			}
		}, false},
		{"Ready turns Unknown", func(n *corev1.Node) {
			n.Status.Conditions[0].Status = corev1.ConditionUnknown
			n.Status.Conditions[0].LastTransitionTime = later
		}, true},
		{"a condition's reason", func(n *corev1.Node) { n.Status.Conditions[1].Reason = "KubeletHasSufficientMemory" }, true},
		{"a condition added", func(n *corev1.Node) {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: "Fault", Status: corev1.ConditionTrue})
		}, true},
		{"labels", func(n *corev1.Node) { n.Labels["a"] = "c" }, true},
		{"the Machine annotation", func(n *corev1.Node) { n.Annotations["machine.openshift.io/machine"] = "ns/other" }, true},
		{"taints", func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}} }, true},
		{"providerID", func(n *corev1.Node) { n.Spec.ProviderID = "sim:///sim-east-1a/i-2" }, true},
		{"addresses", func(n *corev1.Node) { n.Status.Addresses[0].Address = "10.0.0.2" }, true},
		{"node info", func(n *corev1.Node) { n.Status.NodeInfo.KubeletVersion = "v1.35.0" }, true},
		{"deletion", func(n *corev1.Node) { n.DeletionTimestamp = &later }, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, n := base(), base()
			c.change(n)
			if got := gate.NodeChanged.Update(event.UpdateEvent{ObjectOld: o, ObjectNew: n}); got != c.want {
				t.Fatalf("NodeChanged = %v, want %v", got, c.want)
			}
		})
	}
	if !gate.NodeChanged.Create(event.CreateEvent{Object: base()}) || !gate.NodeChanged.Delete(event.DeleteEvent{Object: base()}) {
		t.Fatal("creations and deletions must pass")
	}
}
