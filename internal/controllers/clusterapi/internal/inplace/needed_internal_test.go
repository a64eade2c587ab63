package inplace

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// needed answers what Apply would, and leaves the Machine (possibly the cache's) alone.
func TestNeededAgreesWithApplyAndChangesNothing(t *testing.T) {
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", Labels: map[string]string{"team": "red"}},
		Spec: clusterv1.MachineSpec{Deletion: clusterv1.MachineDeletionSpec{NodeDrainTimeoutSeconds: ptr.To[int32](5)},
			Taints: []clusterv1.MachineTaint{{Key: "gpu", Effect: "NoSchedule", Propagation: clusterv1.MachineTaintPropagationAlways}}},
		Status: clusterv1.MachineStatus{Phase: "Running"}}
	for _, tc := range []struct {
		name   string
		meta   clusterv1.ObjectMeta
		spec   *clusterv1.MachineSpec
		taints bool
	}{
		{"same", clusterv1.ObjectMeta{Labels: map[string]string{"team": "red"}},
			&clusterv1.MachineSpec{Deletion: clusterv1.MachineDeletionSpec{NodeDrainTimeoutSeconds: ptr.To[int32](5)}}, false},
		{"label", clusterv1.ObjectMeta{Labels: map[string]string{"team": "blue"}}, nil, false},
		{"annotation", clusterv1.ObjectMeta{Annotations: map[string]string{"a": "b"}}, nil, false},
		{"drain timeout dropped", clusterv1.ObjectMeta{}, &clusterv1.MachineSpec{}, false},
		{"minReadySeconds", clusterv1.ObjectMeta{}, &clusterv1.MachineSpec{MinReadySeconds: ptr.To[int32](3),
			Deletion: clusterv1.MachineDeletionSpec{NodeDrainTimeoutSeconds: ptr.To[int32](5)}}, false},
		{"taints dropped", clusterv1.ObjectMeta{}, &clusterv1.MachineSpec{
			Deletion: clusterv1.MachineDeletionSpec{NodeDrainTimeoutSeconds: ptr.To[int32](5)}}, true},
		{"taints dropped, not followed", clusterv1.ObjectMeta{}, &clusterv1.MachineSpec{
			Deletion: clusterv1.MachineDeletionSpec{NodeDrainTimeoutSeconds: ptr.To[int32](5)}}, false},
	} {
		before := m.DeepCopy()
		tmpl := Template{Meta: tc.meta, Spec: tc.spec, Taints: tc.taints}
		got := needed(m, tmpl)
		if !equality.Semantic.DeepEqual(before, m) {
			t.Fatalf("%s: needed changed the Machine", tc.name)
		}
		if want := Apply(m.DeepCopy(), tmpl); got != want {
			t.Errorf("%s: needed %v, Apply %v", tc.name, got, want)
		}
	}
}
