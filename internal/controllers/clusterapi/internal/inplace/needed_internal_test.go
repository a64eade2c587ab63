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
		Spec:   clusterv1.MachineSpec{Deletion: clusterv1.MachineDeletionSpec{NodeDrainTimeoutSeconds: ptr.To[int32](5)}},
		Status: clusterv1.MachineStatus{Phase: "Running"}}
	for _, tc := range []struct {
		name string
		meta clusterv1.ObjectMeta
		spec *clusterv1.MachineSpec
	}{
		{"same", clusterv1.ObjectMeta{Labels: map[string]string{"team": "red"}},
			&clusterv1.MachineSpec{Deletion: clusterv1.MachineDeletionSpec{NodeDrainTimeoutSeconds: ptr.To[int32](5)}}},
		{"label", clusterv1.ObjectMeta{Labels: map[string]string{"team": "blue"}}, nil},
		{"annotation", clusterv1.ObjectMeta{Annotations: map[string]string{"a": "b"}}, nil},
		{"drain timeout dropped", clusterv1.ObjectMeta{}, &clusterv1.MachineSpec{}},
		{"minReadySeconds", clusterv1.ObjectMeta{}, &clusterv1.MachineSpec{MinReadySeconds: ptr.To[int32](3),
			Deletion: clusterv1.MachineDeletionSpec{NodeDrainTimeoutSeconds: ptr.To[int32](5)}}},
	} {
		before := m.DeepCopy()
		got := needed(m, tc.meta, tc.spec)
		if !equality.Semantic.DeepEqual(before, m) {
			t.Fatalf("%s: needed changed the Machine", tc.name)
		}
		if want := Apply(m.DeepCopy(), tc.meta, tc.spec); got != want {
			t.Errorf("%s: needed %v, Apply %v", tc.name, got, want)
		}
	}
}
