package gate_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/machina-dev/machina/internal/gate"
)

func TestClusterChanged(t *testing.T) {
	base := func() *clusterv1.Cluster {
		return &clusterv1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 1, Labels: map[string]string{"a": "b"}},
			Status: clusterv1.ClusterStatus{Conditions: []metav1.Condition{
				{Type: clusterv1.ClusterInfrastructureReadyCondition, Status: metav1.ConditionTrue, Reason: "Ready"},
				{Type: clusterv1.AvailableCondition, Status: metav1.ConditionTrue, Reason: "Available"},
			}},
		}
	}
	cases := []struct {
		name   string
		change func(c *clusterv1.Cluster)
		want   bool
	}{
		{"nothing", func(*clusterv1.Cluster) {}, false},
		{"worker counts", func(c *clusterv1.Cluster) {
			c.Status.Workers = &clusterv1.WorkersStatus{Replicas: ptr.To[int32](7)}
		}, false},
		{"an aggregated condition", func(c *clusterv1.Cluster) { c.Status.Conditions[1].Status = metav1.ConditionFalse }, false},
		{"spec (paused)", func(c *clusterv1.Cluster) { c.Spec.Paused = ptr.To(true); c.Generation++ }, true},
		{"paused annotation", func(c *clusterv1.Cluster) { c.Annotations = map[string]string{clusterv1.PausedAnnotation: ""} }, true},
		{"labels", func(c *clusterv1.Cluster) { c.Labels["a"] = "c" }, true},
		{"deletion", func(c *clusterv1.Cluster) { c.DeletionTimestamp = &metav1.Time{} }, true},
		{"infrastructure provisioned", func(c *clusterv1.Cluster) {
			c.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
		}, true},
		{"InfrastructureReady", func(c *clusterv1.Cluster) { c.Status.Conditions[0].Status = metav1.ConditionFalse }, true},
		{"ControlPlaneInitialized appears", func(c *clusterv1.Cluster) {
			c.Status.Conditions = append(c.Status.Conditions, metav1.Condition{Type: clusterv1.ClusterControlPlaneInitializedCondition, Status: metav1.ConditionTrue})
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, n := base(), base()
			tc.change(n)
			if got := gate.ClusterChanged.Update(event.UpdateEvent{ObjectOld: o, ObjectNew: n}); got != tc.want {
				t.Errorf("update passes = %v, want %v", got, tc.want)
			}
		})
	}
	if !gate.ClusterChanged.Create(event.CreateEvent{Object: base()}) || !gate.ClusterChanged.Delete(event.DeleteEvent{Object: base()}) {
		t.Error("creation and deletion must pass")
	}
}
