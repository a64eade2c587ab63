package machinehealthcheck

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/machina-dev/machina/internal/authority"
)

func TestTriggerAllows(t *testing.T) {
	for _, tc := range []struct {
		name                string
		le                  *intstr.IntOrString
		inRange             string
		expected, unhealthy int
		allowed             bool
		max                 int
		err                 bool
	}{
		{"unset allows everything", nil, "", 5, 5, true, 5, false},
		{"number, within", ptr.To(intstr.FromInt32(2)), "", 5, 2, true, 2, false},
		{"number, above", ptr.To(intstr.FromInt32(2)), "", 5, 3, false, 2, false},
		{"percent rounds down", ptr.To(intstr.FromString("50%")), "", 3, 2, false, 1, false},
		{"percent, within", ptr.To(intstr.FromString("40%")), "", 10, 4, true, 4, false},
		{"range takes precedence", ptr.To(intstr.FromInt32(0)), "[2-3]", 5, 2, true, 3, false},
		{"range, below", nil, "[2-3]", 5, 1, false, 3, false},
		{"range, above", nil, "[2-3]", 5, 4, false, 3, false},
		{"bad range", nil, "2-3", 5, 1, false, 0, true},
		{"inverted range", nil, "[3-2]", 5, 1, false, 0, true},
	} {
		mhc := &clusterv1.MachineHealthCheck{}
		mhc.Spec.Remediation.TriggerIf = clusterv1.MachineHealthCheckRemediationTriggerIf{UnhealthyLessThanOrEqualTo: tc.le, UnhealthyInRange: tc.inRange}
		allowed, max, err := triggerAllows(mhc, tc.expected, tc.unhealthy)
		if (err != nil) != tc.err || (err == nil && (allowed != tc.allowed || max != tc.max)) {
			t.Errorf("%s: got %v %d %v", tc.name, allowed, max, err)
		}
	}
}

func TestEvaluate(t *testing.T) {
	now := time.Now()
	mhc := &clusterv1.MachineHealthCheck{}
	mhc.Spec.Checks = clusterv1.MachineHealthCheckChecks{
		NodeStartupTimeoutSeconds: ptr.To[int32](60),
		UnhealthyNodeConditions:   []clusterv1.UnhealthyNodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: ptr.To[int32](30)}},
		UnhealthyMachineConditions: []clusterv1.UnhealthyMachineCondition{{Type: "Custom", Status: metav1.ConditionTrue,
			TimeoutSeconds: ptr.To[int32](10)}},
	}
	cluster := &clusterv1.Cluster{}
	created := func(ago time.Duration) *clusterv1.Machine {
		return &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", CreationTimestamp: metav1.NewTime(now.Add(-ago))}}
	}
	node := func(status corev1.ConditionStatus, ago time.Duration) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: status, LastTransitionTime: metav1.NewTime(now.Add(-ago))}}}}
	}
	withNode := func(m *clusterv1.Machine) *clusterv1.Machine {
		m.Status.NodeRef = clusterv1.MachineNodeReference{Name: "n"}
		return m
	}
	for _, tc := range []struct {
		name   string
		t      target
		reason string
		next   time.Duration
	}{
		{"starting, within timeout", target{machine: created(20 * time.Second)}, "", 40 * time.Second},
		{"no Node after timeout", target{machine: created(2 * time.Minute)}, clusterv1.MachineHealthCheckNodeStartupTimeoutReason, 0},
		{"Node deleted", target{machine: withNode(created(time.Hour)), nodeGone: true}, clusterv1.MachineHealthCheckNodeDeletedReason, 0},
		{"Node NotReady, not long enough", target{machine: withNode(created(time.Hour)), node: node(corev1.ConditionFalse, 10*time.Second)}, "", 20 * time.Second},
		{"Node NotReady too long", target{machine: withNode(created(time.Hour)), node: node(corev1.ConditionFalse, time.Minute)}, clusterv1.MachineHealthCheckUnhealthyNodeReason, 0},
		{"healthy Node", target{machine: withNode(created(time.Hour)), node: node(corev1.ConditionTrue, time.Hour)}, "", 0},
		{"remediate annotation", target{machine: func() *clusterv1.Machine {
			m := created(time.Second)
			m.Annotations = map[string]string{clusterv1.RemediateMachineAnnotation: ""}
			return m
		}()}, clusterv1.MachineHealthCheckHasRemediateAnnotationReason, 0},
		{"Machine condition too long", target{machine: func() *clusterv1.Machine {
			m := withNode(created(time.Hour))
			m.Status.Conditions = []metav1.Condition{{Type: "Custom", Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))}}
			return m
		}(), node: node(corev1.ConditionTrue, time.Hour)}, clusterv1.MachineHealthCheckUnhealthyMachineReason, 0},
	} {
		tc.t.evaluate(mhc, cluster, now)
		if tc.t.reason != tc.reason || tc.t.unhealthy != (tc.reason != "") || (tc.next > 0 && (tc.t.nextCheck-tc.next).Abs() > time.Second) ||
			(tc.next == 0 && tc.t.nextCheck != 0) {
			t.Errorf("%s: unhealthy %v reason %q next %s", tc.name, tc.t.unhealthy, tc.t.reason, tc.t.nextCheck)
		}
	}
	// Disabled startup timeout.
	mhc.Spec.Checks.NodeStartupTimeoutSeconds = ptr.To[int32](0)
	tg := target{machine: created(time.Hour)}
	tg.evaluate(mhc, cluster, now)
	if tg.unhealthy || tg.nextCheck != 0 {
		t.Errorf("nodeStartupTimeoutSeconds 0 should disable the check: %+v", tg)
	}
}

// The outage of issue #24: three Machines, unhealthyLessThanOrEqualTo 1, Nodes failing 30 s
// apart with a 45 s timeout. When the first is past its timeout the second has been NotReady
// for 15 s and a replacement is still waiting for its Node: only one Machine counts as
// healthy, so remediation stops although one alone is eligible for it.
func TestAssessCountsFailingMachinesWithinTheirTimeout(t *testing.T) {
	now := time.Now()
	mhc := &clusterv1.MachineHealthCheck{}
	mhc.Spec.Checks.UnhealthyNodeConditions = []clusterv1.UnhealthyNodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: ptr.To[int32](45)}}
	mhc.Spec.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo = ptr.To(intstr.FromInt32(1))
	machine := func(name string) *clusterv1.Machine {
		return &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
			Status: clusterv1.MachineStatus{NodeRef: clusterv1.MachineNodeReference{Name: name}}}
	}
	node := func(status corev1.ConditionStatus, since time.Duration) *corev1.Node {
		return &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: status, LastTransitionTime: metav1.NewTime(now.Add(-since))}}}}
	}
	targets := []*target{
		{machine: machine("a"), node: node(corev1.ConditionFalse, 46*time.Second)},
		{machine: machine("b"), node: node(corev1.ConditionFalse, 16*time.Second)},
		{machine: machine("c"), node: node(corev1.ConditionTrue, time.Hour)},
	}
	healthy, next := assess(mhc, &clusterv1.Cluster{}, targets, now)
	if healthy != 1 || !targets[0].unhealthy || targets[1].unhealthy || next <= 0 || next > 30*time.Second {
		t.Fatalf("healthy %d, a unhealthy %v, b unhealthy %v, next %s; want 1 healthy, only a unhealthy, next within 30s",
			healthy, targets[0].unhealthy, targets[1].unhealthy, next)
	}
	if allowed, _, _ := triggerAllows(mhc, len(targets), len(targets)-healthy); allowed {
		t.Fatal("remediation allowed with 2 of 3 Machines not healthy and unhealthyLessThanOrEqualTo 1")
	}
	// A Machine still waiting for its Node is not healthy either.
	booting := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "booting", CreationTimestamp: metav1.NewTime(now)}}
	targets[1] = &target{machine: booting}
	if healthy, _ := assess(mhc, &clusterv1.Cluster{}, targets, now); healthy != 1 {
		t.Fatalf("a Machine without a Node counted as healthy: %d healthy", healthy)
	}
}

// Machines with skip-remediation, or paused, are not targets of the check's controller, as
// upstream; in Mirrors mode a paused mirror of a Machine API Machine is.
func TestOptedOut(t *testing.T) {
	for _, tc := range []struct {
		name            string
		annotations     map[string]string
		finalizers      []string
		out, outMirrors bool
	}{
		{"plain", nil, nil, false, false},
		{"skip-remediation", map[string]string{clusterv1.MachineSkipRemediationAnnotation: ""}, nil, true, true},
		{"paused", map[string]string{clusterv1.PausedAnnotation: ""}, nil, true, true},
		{"paused mirror of a Machine API Machine", map[string]string{clusterv1.PausedAnnotation: ""}, []string{authority.SyncFinalizer}, true, false},
		{"skip-remediation on a mirror", map[string]string{clusterv1.PausedAnnotation: "", clusterv1.MachineSkipRemediationAnnotation: ""},
			[]string{authority.SyncFinalizer}, true, true},
	} {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations, Finalizers: tc.finalizers}}
		if got := (&Reconciler{}).optedOut(m); got != tc.out {
			t.Errorf("%s: opted out %v, want %v", tc.name, got, tc.out)
		}
		if got := (&Reconciler{Mirrors: true}).optedOut(m); got != tc.outMirrors {
			t.Errorf("%s, Mirrors mode: opted out %v, want %v", tc.name, got, tc.outMirrors)
		}
	}
}
