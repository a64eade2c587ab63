package machinedeployment

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// fakeSet is a MachineSet with spec.replicas and Machines described by letters: A available,
// u unavailable, M marked and available, m marked and unavailable, d being deleted.
func fakeSet(name string, replicas int32, machines string) *set {
	s := &set{ms: &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: clusterv1.MachineSetSpec{Replicas: ptr.To(replicas)}}, created: true}
	for i, c := range machines {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i), Annotations: map[string]string{}}}
		if strings.ContainsRune("AM", c) {
			m.Status.Conditions = []metav1.Condition{{Type: clusterv1.MachineAvailableCondition, Status: metav1.ConditionTrue}}
		}
		if strings.ContainsRune("Mm", c) {
			m.Annotations[clusterv1.DeleteMachineAnnotation] = "true"
		}
		if c == 'd' {
			m.DeletionTimestamp = ptr.To(metav1.Now())
		}
		s.machines = append(s.machines, m)
	}
	return s
}

func TestPlanRollingUpdate(t *testing.T) {
	for _, tc := range []struct {
		name             string
		st               strategy
		old, new         *set
		wantOld, wantNew int32
		wantMarked       int
	}{
		{"surge first", strategy{replicas: 3, surge: 1}, fakeSet("o", 3, "AAA"), fakeSet("n", 0, ""), 3, 1, 0},
		{"new available: one old goes", strategy{replicas: 3, surge: 1}, fakeSet("o", 3, "AAA"), fakeSet("n", 1, "A"), 2, 1, 0},
		{"old Machine still deleting holds the surge", strategy{replicas: 3, surge: 1}, fakeSet("o", 2, "AAd"), fakeSet("n", 1, "A"), 2, 1, 0},
		{"old Machine gone: surge again", strategy{replicas: 3, surge: 1}, fakeSet("o", 2, "AA"), fakeSet("n", 1, "A"), 2, 2, 0},
		{"maxUnavailable: old goes first", strategy{replicas: 3, unavailable: 1}, fakeSet("o", 3, "AAA"), fakeSet("n", 0, ""), 2, 0, 0},
		{"unavailable old Machines are marked, not counted yet", strategy{replicas: 3, surge: 1}, fakeSet("o", 3, "AAu"), fakeSet("n", 1, "u"), 3, 1, 1},
		{"marked unavailable Machines go without budget", strategy{replicas: 3, surge: 1}, fakeSet("o", 3, "AAm"), fakeSet("n", 1, "u"), 2, 1, 0},
		{"marked available Machines cost budget", strategy{replicas: 3, surge: 1}, fakeSet("o", 3, "AMM"), fakeSet("n", 1, "u"), 3, 1, 0},
		{"old Machines lost to a user or remediation are not waited for", strategy{replicas: 3, surge: 1}, fakeSet("o", 3, "AA"), fakeSet("n", 1, "A"), 2, 2, 0},
		{"a scale-down the cache does not show yet counts as done", strategy{replicas: 3, surge: 1}, fakeSet("o", 2, "AAA"), fakeSet("n", 1, "A"), 2, 1, 0},
		{"scale down during rollout", strategy{replicas: 1, surge: 1}, fakeSet("o", 2, "AA"), fakeSet("n", 2, "AA"), 0, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planRollingUpdate(tc.st, tc.new, []*set{tc.old})
			if p.replicas[tc.old] != tc.wantOld || p.replicas[tc.new] != tc.wantNew || len(p.mark) != tc.wantMarked {
				t.Errorf("old %d new %d marked %d, want %d %d %d", p.replicas[tc.old], p.replicas[tc.new], len(p.mark),
					tc.wantOld, tc.wantNew, tc.wantMarked)
			}
		})
	}
}

func TestPlanOnDelete(t *testing.T) {
	old, newS := fakeSet("o", 3, "AAd"), fakeSet("n", 0, "")
	p := planOnDelete(strategy{replicas: 3, onDelete: true}, newS, []*set{old})
	if p.replicas[old] != 2 || p.replicas[newS] != 1 {
		t.Errorf("old %d new %d, want 2 1", p.replicas[old], p.replicas[newS])
	}
	// Scaling the MachineDeployment down takes old Machines first.
	p = planOnDelete(strategy{replicas: 1, onDelete: true}, fakeSet("n", 1, "A"), []*set{old})
	if p.replicas[old] != 0 {
		t.Errorf("old %d, want 0", p.replicas[old])
	}
}

func TestValidateStrategy(t *testing.T) {
	md := func(surge, unavailable *intstr.IntOrString) *clusterv1.MachineDeployment {
		return &clusterv1.MachineDeployment{Spec: clusterv1.MachineDeploymentSpec{Replicas: ptr.To[int32](10),
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
			Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"a": "b"}},
				Spec: clusterv1.MachineSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "x", Kind: "K", Name: "n"}}},
			Rollout: clusterv1.MachineDeploymentRolloutSpec{Strategy: clusterv1.MachineDeploymentRolloutStrategy{
				RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{MaxSurge: surge, MaxUnavailable: unavailable}}}}}
	}
	pct := func(s string) *intstr.IntOrString { return ptr.To(intstr.FromString(s)) }
	zero := ptr.To(intstr.FromInt32(0))
	if st, err := validate(md(nil, nil)); err != nil || st.surge != 1 || st.unavailable != 0 {
		t.Errorf("defaults: %+v %v", st, err)
	}
	if st, err := validate(md(pct("15%"), pct("15%"))); err != nil || st.surge != 2 || st.unavailable != 1 {
		t.Errorf("percentages: %+v %v (surge rounds up, unavailable down)", st, err)
	}
	if st, err := validate(md(pct("1%"), pct("1%"))); err != nil || st.surge != 1 {
		t.Errorf("1%%: %+v %v", st, err)
	}
	if _, err := validate(md(zero, zero)); err == nil || !strings.Contains(err.Error(), "spec.rollout.strategy.rollingUpdate") {
		t.Errorf("both zero: %v", err)
	}
	if _, err := validate(md(pct("lots"), nil)); err == nil || !strings.Contains(err.Error(), "maxSurge") {
		t.Errorf("bad percentage: %v", err)
	}
	bad := md(nil, nil)
	bad.Spec.Selector.MatchLabels = map[string]string{"a": "c"}
	if _, err := validate(bad); err == nil || !strings.Contains(err.Error(), "spec.selector") {
		t.Errorf("selector: %v", err)
	}
}
