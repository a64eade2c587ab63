package machine

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// Only template changes (and a MachineDeployment's spec.rollout.after) of a MachineSet or
// MachineDeployment bring its Machines back to recompute UpToDate; scaling does not.
func TestTemplateChangedPredicate(t *testing.T) {
	ms := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Spec: clusterv1.MachineSetSpec{Replicas: ptr.To[int32](1)}}
	scaled := ms.DeepCopy()
	scaled.Generation, scaled.Spec.Replicas = 2, ptr.To[int32](5)
	relabelled := ms.DeepCopy()
	relabelled.Generation, relabelled.Spec.Template.Labels = 2, map[string]string{"tier": "gpu"}
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Generation: 1}}
	rollout := md.DeepCopy()
	rollout.Generation, rollout.Spec.Rollout.After = 2, metav1.NewTime(time.Now())
	for name, c := range map[string]struct {
		e    event.UpdateEvent
		want bool
	}{
		"MachineSet scaled":               {event.UpdateEvent{ObjectOld: ms, ObjectNew: scaled}, false},
		"MachineSet template labels":      {event.UpdateEvent{ObjectOld: ms, ObjectNew: relabelled}, true},
		"MachineDeployment rollout.after": {event.UpdateEvent{ObjectOld: md, ObjectNew: rollout}, true},
		"MachineDeployment unchanged":     {event.UpdateEvent{ObjectOld: md, ObjectNew: md.DeepCopy()}, false},
	} {
		if got := templateChanged.Update(c.e); got != c.want {
			t.Errorf("%s: predicate %v, want %v", name, got, c.want)
		}
	}
}
