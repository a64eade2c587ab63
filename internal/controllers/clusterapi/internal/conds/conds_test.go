package conds

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
)

var rs = Reasons{Issue: "Bad", Unknown: "Unsure", OK: "Fine"}

func machine(name string, s metav1.ConditionStatus, msg string) *clusterv1.Machine {
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if s != "" {
		m.Status.Conditions = []metav1.Condition{{Type: clusterv1.MachineReadyCondition, Status: s, Reason: "R", Message: msg}}
	}
	return m
}

// The message names up to three objects per distinct message, the message most objects
// share first, at most three lines, then counts the objects left out; issues come before
// the unknown, and kinds are told apart.
func TestAggregateMessage(t *testing.T) {
	var objs []Object
	for i, msg := range []string{"disk", "net", "disk", "cpu", "mem", "disk", "disk"} {
		objs = append(objs, machine(string(rune('a'+i)), metav1.ConditionFalse, msg))
	}
	objs = append(objs, machine("z", metav1.ConditionUnknown, "lost"), &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "ms"}})
	c := Aggregate(objs, clusterv1.MachineReadyCondition, "MachinesReady", Positive, rs)
	want := "* Machines a, c, f, ... (1 more): disk\n* Machine b: net\n* Machine d: cpu\nAnd 1 Machine with other issues\n" +
		"And 1 Machine with status unknown\nAnd 1 MachineSet with status unknown"
	if c.Type != "MachinesReady" || c.Status != metav1.ConditionFalse || c.Reason != "Bad" || c.Message != want {
		t.Errorf("Aggregate = %s %s/%s %q, want MachinesReady False/Bad:\n%s", c.Type, c.Status, c.Reason, c.Message, want)
	}
}

// Positive: Unknown and missing make the result Unknown; Strict counts them as issues;
// Negative reports True while an object is in the abnormal (True) state.
func TestAggregatePolarity(t *testing.T) {
	mixed := []*clusterv1.Machine{machine("a", metav1.ConditionTrue, ""), machine("b", "", "")}
	if c := Aggregate(mixed, clusterv1.MachineReadyCondition, "MachinesReady", Positive, rs); c.Status != metav1.ConditionUnknown ||
		c.Reason != "Unsure" || c.Message != "* Machine b: Condition Ready not yet reported" {
		t.Errorf("Positive = %s/%s %q, want Unknown/Unsure naming b", c.Status, c.Reason, c.Message)
	}
	if c := Aggregate(mixed, clusterv1.MachineReadyCondition, "MachinesReady", Strict, rs); c.Status != metav1.ConditionFalse || c.Reason != "Bad" {
		t.Errorf("Strict = %s/%s %q, want False/Bad", c.Status, c.Reason, c.Message)
	}
	fine := []*clusterv1.Machine{machine("a", metav1.ConditionTrue, "")}
	if c := Aggregate(fine, clusterv1.MachineReadyCondition, "MachinesReady", Strict, rs); c.Status != metav1.ConditionTrue || c.Reason != "Fine" ||
		c.Message != "" {
		t.Errorf("Strict, all True = %s/%s %q, want True/Fine without a message", c.Status, c.Reason, c.Message)
	}
	if c := Aggregate(fine, clusterv1.MachineReadyCondition, "ScalingUp", Negative, rs); c.Status != metav1.ConditionTrue || c.Reason != "Bad" {
		t.Errorf("Negative, one True = %s/%s, want True/Bad", c.Status, c.Reason)
	}
	quiet := []*clusterv1.Machine{machine("a", metav1.ConditionFalse, "")}
	if c := Aggregate(quiet, clusterv1.MachineReadyCondition, "ScalingUp", Negative, rs); c.Status != metav1.ConditionFalse || c.Reason != "Fine" {
		t.Errorf("Negative, all False = %s/%s, want False/Fine", c.Status, c.Reason)
	}
	if c := Aggregate([]*clusterv1.Machine{}, clusterv1.MachineReadyCondition, "MachinesReady", Positive, rs); c.Status != metav1.ConditionUnknown ||
		c.Reason != clusterv1.InternalErrorReason {
		t.Errorf("no objects = %s/%s, want Unknown/InternalError", c.Status, c.Reason)
	}
}

// When every object is fine the message is empty, whatever the objects' own messages: the
// library's default would name them ("* Machines a, b: up", "And 2 Machines with additional
// info"), and the owner's status would change with each child's message. Issues and unknowns
// are named as the library names them.
func TestAggregateQuietWhenFine(t *testing.T) {
	var fine []*clusterv1.Machine
	for i, msg := range []string{"up", "up", "the Machine API reports it Running", "", "up"} {
		fine = append(fine, machine(fmt.Sprintf("m-%d", i), metav1.ConditionTrue, msg))
	}
	for _, p := range []Polarity{Positive, Strict} {
		if c := Aggregate(fine, clusterv1.MachineReadyCondition, "MachinesReady", p, rs); c.Status != metav1.ConditionTrue ||
			c.Reason != "Fine" || c.Message != "" {
			t.Errorf("polarity %d, all True: %s/%s %q, want True/Fine without a message", p, c.Status, c.Reason, c.Message)
		}
	}
	quiet := []*clusterv1.Machine{machine("a", metav1.ConditionFalse, "not scaling"), machine("b", metav1.ConditionFalse, "idle")}
	if c := Aggregate(quiet, clusterv1.MachineReadyCondition, "ScalingUp", Negative, rs); c.Status != metav1.ConditionFalse ||
		c.Reason != "Fine" || c.Message != "" {
		t.Errorf("Negative, all False: %s/%s %q, want False/Fine without a message", c.Status, c.Reason, c.Message)
	}
	mixed := append(slices.Clone(fine), machine("z", metav1.ConditionFalse, "disk"))
	if c := Aggregate(mixed, clusterv1.MachineReadyCondition, "MachinesReady", Positive, rs); c.Status != metav1.ConditionFalse ||
		c.Message != "* Machine z: disk" {
		t.Errorf("one False: %s %q, want False naming z alone", c.Status, c.Message)
	}
}

// Remediating is True with the owner's reason, whatever the Machines' OwnerRemediated say.
func TestRemediating(t *testing.T) {
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Status: clusterv1.MachineStatus{Conditions: []metav1.Condition{
		{Type: clusterv1.MachineOwnerRemediatedCondition, Status: metav1.ConditionFalse, Reason: "WaitingForRemediation", Message: "Waiting for remediation"}}}}
	c := Remediating([]*clusterv1.Machine{m}, clusterv1.MachineSetRemediatingReason)
	if c.Type != clusterv1.RemediatingCondition || c.Status != metav1.ConditionTrue || c.Reason != clusterv1.MachineSetRemediatingReason ||
		c.Message != "* Machine m: Waiting for remediation" {
		t.Errorf("Remediating = %s %s/%s %q", c.Type, c.Status, c.Reason, c.Message)
	}
}

// Mirror copies the reported condition under the target type, fills in an empty reason by
// status, and falls back when nothing (or nothing with a status) is reported.
func TestMirror(t *testing.T) {
	fallback := conditions.FallbackCondition{Status: metav1.ConditionFalse, Reason: "NotProvisioned", Message: "not yet"}
	for _, tc := range []struct {
		name     string
		reported *metav1.Condition
		want     string
	}{
		{"reported", &metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Booting", Message: "half way"}, "False/Booting half way"},
		{"no reason, True", &metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue}, "True/Up "},
		{"no reason, Unknown", &metav1.Condition{Type: "Ready", Status: metav1.ConditionUnknown, Message: "?"}, "Unknown/Down ?"},
		{"no status", &metav1.Condition{Type: "Ready", Reason: "Odd"}, "False/NotProvisioned not yet"},
		{"nothing", nil, "False/NotProvisioned not yet"},
	} {
		c := Mirror(tc.reported, "Ready", "InfrastructureReady", "Up", "Down", fallback)
		if got := string(c.Status) + "/" + c.Reason + " " + c.Message; c.Type != "InfrastructureReady" || got != tc.want {
			t.Errorf("%s: %s %s, want InfrastructureReady %s", tc.name, c.Type, got, tc.want)
		}
	}
}

// BenchmarkAggregate merges the Ready conditions of 3000 Machines of 12 conditions each, one
// in seven not ready.
func BenchmarkAggregate(b *testing.B) {
	types := []string{"Available", "Ready", "BootstrapConfigReady", "InfrastructureReady", "NodeReady", "NodeHealthy",
		"UpToDate", "Deleting", "Paused", "Updating", "HealthCheckSucceeded", "OwnerRemediated"}
	machines := make([]*clusterv1.Machine, 3000)
	for i := range machines {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("m-%d", i)}}
		for _, t := range types {
			s := metav1.ConditionTrue
			if i%7 == 0 && t == clusterv1.MachineReadyCondition {
				s = metav1.ConditionFalse
			}
			m.Status.Conditions = append(m.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: "R", Message: "about " + t})
		}
		machines[i] = m
	}
	b.ReportAllocs()
	for b.Loop() {
		Aggregate(machines, clusterv1.MachineReadyCondition, "MachinesReady", Positive, rs)
	}
}

// Handing the library only the objects in scope gives what it gives on them all, whatever
// the mix of statuses, messages, missing conditions and control-plane Machines.
func TestInScopeChangesNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	statuses := []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown, ""}
	messages := []string{"", "", "disk", "net", "* a\n* b"}
	for round := range 300 {
		n := 1 + rng.IntN(12)
		machines := make([]*clusterv1.Machine, n)
		for i := range machines {
			m := machine(fmt.Sprintf("m-%02d", i), statuses[rng.IntN(len(statuses))], messages[rng.IntN(len(messages))])
			if rng.IntN(4) == 0 {
				m.Labels = map[string]string{clusterv1.MachineControlPlaneLabel: ""}
			}
			machines[i] = m
		}
		for _, p := range []Polarity{Positive, Negative, Strict} {
			got := Aggregate(machines, clusterv1.MachineReadyCondition, "Target", p, rs)
			want := whole(t, machines, p)
			if got.Status != want.Status || got.Reason != want.Reason || got.Message != want.Message {
				t.Fatalf("round %d, polarity %d: %s/%s %q, the library on all of them %s/%s %q",
					round, p, got.Status, got.Reason, got.Message, want.Status, want.Reason, want.Message)
			}
		}
	}
}

// whole is the library's merge over every Machine, with the options merge gives it.
func whole(t *testing.T, machines []*clusterv1.Machine, p Polarity) *metav1.Condition {
	priority := conditions.GetDefaultMergePriorityFunc()
	opts := []conditions.DefaultMergeStrategyOption{
		conditions.ComputeReasonFunc(conditions.GetDefaultComputeMergeReasonFunc(rs.Issue, rs.Unknown, rs.OK))}
	switch p {
	case Negative:
		priority = conditions.GetDefaultMergePriorityFunc(clusterv1.MachineReadyCondition)
		opts = append(opts, conditions.TargetConditionHasPositivePolarity(false))
	case Strict:
		priority = notTrueIsIssue
	}
	opts = append(opts, conditions.GetPriorityFunc(priority))
	c, err := conditions.NewAggregateCondition(machines, clusterv1.MachineReadyCondition, conditions.TargetConditionType("Target"),
		conditions.CustomMergeStrategy{MergeStrategy: quietWhenFine{MergeStrategy: conditions.DefaultMergeStrategy(opts...), priority: priority}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
