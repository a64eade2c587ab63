package machine

import (
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A Machine update that only moves the status this controller writes brings no pass; one
// that moves anything it acts on does.
func TestStatusEcho(t *testing.T) {
	base := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", Generation: 2, Labels: map[string]string{"a": "b"},
		Annotations: map[string]string{InstanceStateAnnotation: "running"}, Finalizers: []string{machinev1beta1.MachineFinalizer}},
		Status: machinev1beta1.MachineStatus{AuthoritativeAPI: machinev1beta1.MachineAuthorityMachineAPI, Phase: ptr.To("Provisioned")}}
	paused := base.DeepCopy()
	paused.Status.Conditions = []machinev1beta1.Condition{{Type: "Paused", Status: corev1.ConditionTrue}}
	if ownEcho(paused, base) {
		t.Error("the end of a pause, stored by a resumed Machine's pass, brings no pass")
	}
	fresh := base.DeepCopy()
	fresh.Finalizers = []string{"other"}
	stored := fresh.DeepCopy()
	stored.Finalizers = append(stored.Finalizers, machinev1beta1.MachineFinalizer)
	if !ownEcho(fresh, stored) {
		t.Error("the Machine's finalizer, stored by the pass that goes on to act, brings another pass")
	}
	if ownEcho(stored, fresh) {
		t.Error("the Machine's finalizer taken off brings no pass")
	}
	for _, tc := range []struct {
		what   string
		change func(*machinev1beta1.Machine)
		echo   bool
	}{
		{"phase, conditions, addresses", func(m *machinev1beta1.Machine) {
			m.Status.Phase = ptr.To("Running")
			m.Status.Conditions = []machinev1beta1.Condition{{Type: "InstanceExists", Status: corev1.ConditionTrue}}
			m.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}
		}, true},
		{"spec", func(m *machinev1beta1.Machine) {
			m.Spec.LifecycleHooks.PreDrain = []machinev1beta1.LifecycleHook{{Name: "h", Owner: "o"}}
			m.Generation++
		}, false},
		{"Node", func(m *machinev1beta1.Machine) { m.Status.NodeRef = &corev1.ObjectReference{Kind: "Node", Name: "n"} }, false},
		{"authority", func(m *machinev1beta1.Machine) { m.Status.AuthoritativeAPI = machinev1beta1.MachineAuthorityMigrating }, false},
		{"the first Paused=False", func(m *machinev1beta1.Machine) {
			m.Status.Conditions = []machinev1beta1.Condition{{Type: "Paused", Status: corev1.ConditionFalse}}
		}, true},
		{"deletion", func(m *machinev1beta1.Machine) { m.DeletionTimestamp = ptr.To(metav1.Now()) }, false},
		{"the actuator's record of the instance", func(m *machinev1beta1.Machine) {
			m.Spec.ProviderID = ptr.To("aws:///us-east-1a/i-0")
			m.Generation++
			m.Labels["machine.openshift.io/instance-type"] = "m6i.xlarge"
			m.Annotations[InstanceStateAnnotation] = "pending"
		}, true},
		{"annotation", func(m *machinev1beta1.Machine) { m.Annotations[ExcludeNodeDrainingAnnotation] = "" }, false},
		{"the spec besides the providerID", func(m *machinev1beta1.Machine) {
			m.Spec.ProviderID = ptr.To("aws:///us-east-1a/i-0")
			m.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
			m.Generation++
		}, false},
		{"label", func(m *machinev1beta1.Machine) { m.Labels["a"] = "c" }, false},
		{"finalizer", func(m *machinev1beta1.Machine) { m.Finalizers = nil }, false},
		{"owner", func(m *machinev1beta1.Machine) {
			m.OwnerReferences = []metav1.OwnerReference{{Kind: "MachineSet", Name: "s"}}
		}, false},
	} {
		cur := base.DeepCopy()
		tc.change(cur)
		if got := ownEcho(base, cur); got != tc.echo {
			t.Errorf("%s: ownEcho = %v, want %v", tc.what, got, tc.echo)
		}
	}
}

// The Node updates that bring the Machine back: deletion, readiness, the Machine it names.
func TestNodeHealthChanged(t *testing.T) {
	ready := func(s corev1.ConditionStatus) []corev1.NodeCondition {
		return []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}, {Type: corev1.NodeReady, Status: s}}
	}
	base := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{NodeMachineAnnotation: "ns/m"}},
		Status: corev1.NodeStatus{Conditions: ready(corev1.ConditionTrue)}}
	notReady := base.DeepCopy()
	notReady.Status.Conditions = ready(corev1.ConditionFalse)
	unlinked := base.DeepCopy()
	unlinked.Annotations = nil
	for _, tc := range []struct {
		what    string
		old     *corev1.Node // base when nil
		change  func(*corev1.Node)
		changed bool
	}{
		{"turning Ready", notReady, func(n *corev1.Node) { n.Status.Conditions = ready(corev1.ConditionTrue) }, false},
		{"the first link", unlinked, func(n *corev1.Node) { n.Annotations = map[string]string{NodeMachineAnnotation: "ns/m"} }, false},
		{"labels, taints, addresses, another condition", nil, func(n *corev1.Node) {
			n.Labels = map[string]string{"node-role.kubernetes.io/worker": ""}
			n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
			n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}
			n.Status.Conditions[0].Status = corev1.ConditionTrue
		}, false},
		{"NotReady", nil, func(n *corev1.Node) { n.Status.Conditions = ready(corev1.ConditionFalse) }, true},
		{"Ready lost", nil, func(n *corev1.Node) { n.Status.Conditions = nil }, true},
		{"deletion", nil, func(n *corev1.Node) { n.DeletionTimestamp = ptr.To(metav1.Now()) }, true},
		{"another Machine", nil, func(n *corev1.Node) { n.Annotations[NodeMachineAnnotation] = "ns/other" }, true},
	} {
		old := base
		if tc.old != nil {
			old = tc.old
		}
		cur := old.DeepCopy()
		tc.change(cur)
		if got := nodeHealthChanged(old, cur); got != tc.changed {
			t.Errorf("%s: nodeHealthChanged = %v, want %v", tc.what, got, tc.changed)
		}
	}
}

// A booting instance this controller launched is looked at again every MaxPendingRequeue;
// one it found pending without having launched it, PendingRequeue.
func TestPendingLook(t *testing.T) {
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	created := func(ago time.Duration) *machinev1beta1.Machine {
		return &machinev1beta1.Machine{Status: machinev1beta1.MachineStatus{Conditions: []machinev1beta1.Condition{{
			Type: machinev1beta1.MachineCreation, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-ago))}}}}
	}
	for _, tc := range []struct {
		m    *machinev1beta1.Machine
		want time.Duration
	}{
		{&machinev1beta1.Machine{}, PendingRequeue},
		{created(0), MaxPendingRequeue},
		{created(time.Second), MaxPendingRequeue},
		{created(3 * time.Second), MaxPendingRequeue},
		{created(time.Minute), MaxPendingRequeue},
	} {
		if got := pendingLook(tc.m, now); got != tc.want {
			t.Errorf("pendingLook(%v) = %v, want %v", tc.m.Status.Conditions, got, tc.want)
		}
	}
}
