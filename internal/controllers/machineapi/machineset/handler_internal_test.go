package machineset

import (
	"context"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/machina-dev/machina/internal/controllers/internal/coalesce"
	"github.com/machina-dev/machina/internal/scheme"
)

// A Machine's progress (status, the actuator's labels and annotations) brings its MachineSet
// back coalesced; what the set acts on (deletion, a relabelling out of its selector, another
// controller) brings it back at once.
func TestMachineHandlerCoalescesProgress(t *testing.T) {
	set := &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "u"},
		Spec: machinev1beta1.MachineSetSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"set": "a"}}}}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(set).Build()
	r := &Reconciler{Client: c, expect: newExpectations()}
	h := r.machineHandler()
	ctx := context.Background()
	machine := func(mutate func(*machinev1beta1.Machine)) *machinev1beta1.Machine {
		m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", Labels: map[string]string{"set": "a"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "machine.openshift.io/v1beta1", Kind: "MachineSet", Name: "a", UID: "u", Controller: ptr.To(true)}}}}
		if mutate != nil {
			mutate(m)
		}
		return m
	}
	for _, tc := range []struct {
		name      string
		old, cur  *machinev1beta1.Machine
		now, late int
	}{
		{"running", machine(nil), machine(func(m *machinev1beta1.Machine) { m.Status.Phase = ptr.To("Running") }), 0, 1},
		{"labelled by the actuator", machine(nil), machine(func(m *machinev1beta1.Machine) {
			m.Labels["machine.openshift.io/instance-type"] = "s1.small"
			m.Annotations = map[string]string{"machine.openshift.io/instance-state": "running"}
		}), 0, 1},
		{"relabelled out of the selector", machine(nil), machine(func(m *machinev1beta1.Machine) { m.Labels["set"] = "b" }), 1, 0},
		{"released", machine(nil), machine(func(m *machinev1beta1.Machine) { m.OwnerReferences = nil }), 1, 0},
		{"deleting", machine(nil), machine(func(m *machinev1beta1.Machine) { m.DeletionTimestamp = &metav1.Time{Time: time.Now()} }), 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			h.Update(ctx, event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.cur}, q)
			if got := q.Len(); got != tc.now {
				t.Fatalf("queued at once: %d, want %d", got, tc.now)
			}
			if tc.late == 0 {
				return
			}
			deadline := time.Now().Add(10 * coalesce.Delay)
			for q.Len() == 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if got := q.Len(); got != tc.late {
				t.Fatalf("queued after the delay: %d, want %d", got, tc.late)
			}
		})
	}
}

// Which status changes may wait for the throttle: counts still moving; not settled counts,
// a new observed generation, an error, a set being deleted.
func TestMinorStatusChange(t *testing.T) {
	set := func(mutate func(*machinev1beta1.MachineSet)) *machinev1beta1.MachineSet {
		ms := &machinev1beta1.MachineSet{Spec: machinev1beta1.MachineSetSpec{Replicas: ptr.To[int32](3)},
			Status: machinev1beta1.MachineSetStatus{Replicas: 3, ReadyReplicas: 1, AvailableReplicas: 1, ObservedGeneration: 1}}
		if mutate != nil {
			mutate(ms)
		}
		return ms
	}
	for _, tc := range []struct {
		name  string
		after *machinev1beta1.MachineSet
		want  bool
	}{
		{"one more ready", set(func(ms *machinev1beta1.MachineSet) { ms.Status.ReadyReplicas, ms.Status.AvailableReplicas = 2, 2 }), true},
		{"all ready", set(func(ms *machinev1beta1.MachineSet) { ms.Status.ReadyReplicas, ms.Status.AvailableReplicas = 3, 3 }), false},
		{"new generation", set(func(ms *machinev1beta1.MachineSet) { ms.Status.ReadyReplicas, ms.Status.ObservedGeneration = 2, 2 }), false},
		{"an error", set(func(ms *machinev1beta1.MachineSet) { ms.Status.ErrorMessage = ptr.To("bad") }), false},
		{"deleting", set(func(ms *machinev1beta1.MachineSet) {
			ms.Status.ReadyReplicas, ms.DeletionTimestamp = 2, &metav1.Time{Time: time.Now()}
		}), false},
	} {
		if got := minorStatusChange(set(nil), tc.after); got != tc.want {
			t.Errorf("%s: minor %v, want %v", tc.name, got, tc.want)
		}
	}
}
