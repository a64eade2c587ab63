package drain

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func testPod(name string, labels map[string]string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

// byLabel classifies pods by their "rule" label: skip, wait, or an order for Drain.
func byLabel(pod *corev1.Pod) (Rule, error) {
	switch v := pod.Labels["rule"]; v {
	case "skip":
		return Rule{Behavior: BehaviorSkip}, nil
	case "wait":
		return Rule{Behavior: BehaviorWaitCompleted, Order: 7}, nil // the order is ignored
	case "-5":
		return Rule{Behavior: BehaviorDrain, Order: -5}, nil
	case "3":
		return Rule{Behavior: BehaviorDrain, Order: 3}, nil
	}
	return Rule{Behavior: BehaviorDrain}, nil
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

// Pods are drained group by group, lowest order first; WaitCompleted pods belong to group 0
// and are waited for, never evicted; Skip pods are left out entirely.
func TestGroupsDrainLowestOrderFirst(t *testing.T) {
	pods := []corev1.Pod{
		testPod("skipped", map[string]string{"rule": "skip"}),
		testPod("wait", map[string]string{"rule": "wait"}),
		testPod("early", map[string]string{"rule": "-5"}),
		testPod("plain", nil),
		testPod("late", map[string]string{"rule": "3"}),
	}
	steps := []struct {
		gone              []string // pods that have left the Node before this pass
		evict             []string
		completing, later []string
	}{
		{evict: []string{"early"}, later: []string{"late", "plain", "wait"}},
		{gone: []string{"early"}, evict: []string{"plain"}, completing: []string{"wait"}, later: []string{"late"}},
		{gone: []string{"plain"}, completing: []string{"wait"}, later: []string{"late"}},
		{gone: []string{"wait"}, evict: []string{"late"}},
	}
	for i, st := range steps {
		pods = slices.DeleteFunc(pods, func(p corev1.Pod) bool { return slices.Contains(st.gone, p.Name) })
		planned, err := plan(pods, false, byLabel)
		if err != nil {
			t.Fatal(err)
		}
		var res Result
		evict := names(group(planned, &res))
		slices.Sort(res.Completing)
		slices.Sort(res.Later)
		if !slices.Equal(evict, st.evict) || !slices.Equal(res.Completing, prefixed(st.completing)) || !slices.Equal(res.Later, prefixed(st.later)) {
			t.Errorf("pass %d: evict %v, completing %v, later %v; want %v, %v, %v", i, evict, res.Completing, res.Later,
				st.evict, prefixed(st.completing), prefixed(st.later))
		}
	}
}

func prefixed(names []string) []string {
	var out []string
	for _, n := range names {
		out = append(out, "ns/"+n)
	}
	return out
}

// A pod already terminating is waited for, not evicted again; on an unreachable Node one
// terminating for more than UnreachableSkipWait is no longer waited for; finished pods and
// a classifier's error are handled before any eviction.
func TestPlanTerminatingFinishedAndErrors(t *testing.T) {
	old := metav1.NewTime(time.Now().Add(-time.Minute))
	terminating := testPod("terminating", nil)
	terminating.DeletionTimestamp = &old
	done := testPod("done", map[string]string{"rule": "wait"})
	done.Status.Phase = corev1.PodSucceeded
	pods := []corev1.Pod{terminating, done, testPod("running", nil)}

	planned, err := plan(pods, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var res Result
	if evict := names(group(planned, &res)); !slices.Equal(evict, []string{"running"}) || !slices.Equal(res.Waiting, []string{"ns/terminating"}) {
		t.Errorf("reachable Node: evict %v, waiting %v; want [running], [ns/terminating]", evict, res.Waiting)
	}
	if planned, _ = plan(pods, true, nil); len(planned) != 1 || planned[0].pod.Name != "running" {
		t.Errorf("unreachable Node: planned %d pods, want only the running one", len(planned))
	}
	if _, err := plan(pods, false, func(*corev1.Pod) (Rule, error) { return Rule{}, errors.New("no rule") }); err == nil {
		t.Error("a classifier's error must stop the drain")
	}
}

// The summary names what blocks the drain: counts and at most three names per kind.
func TestSummaryNamesWhatBlocks(t *testing.T) {
	r := Result{Completing: []string{"ns/a", "ns/b", "ns/c", "ns/d"}, Later: []string{"ns/z"}}
	got := r.Summary()
	for _, want := range []string{"waiting for 4 pod(s) to complete: ns/a, ns/b, ns/c, and 1 more", "1 pod(s) of a later drain order: ns/z"} {
		if !strings.Contains(got, want) {
			t.Errorf("Summary() = %q, want it to contain %q", got, want)
		}
	}
}
