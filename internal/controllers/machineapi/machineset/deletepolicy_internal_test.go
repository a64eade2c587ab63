package machineset

import (
	"slices"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// running builds n Running Machines with Nodes, created a minute apart (m0 the oldest).
func running(n int) []*machinev1beta1.Machine {
	base := time.Now().Add(-time.Hour)
	out := make([]*machinev1beta1.Machine, n)
	for i := range out {
		out[i] = &machinev1beta1.Machine{
			ObjectMeta: metav1.ObjectMeta{Name: "m" + string(rune('0'+i)), CreationTimestamp: metav1.NewTime(base.Add(time.Duration(i) * time.Minute))},
			Status:     machinev1beta1.MachineStatus{Phase: ptr.To(machinev1beta1.PhaseRunning), NodeRef: &corev1.ObjectReference{Name: "n"}},
		}
	}
	return out
}

// Both delete-machine annotations, the current and the legacy one, put a Machine first
// under every policy.
func TestDeleteAnnotationsGoFirst(t *testing.T) {
	for _, key := range []string{DeleteMachineAnnotation, LegacyDeleteMachineAnnotation} {
		for _, policy := range []string{RandomDeletePolicy, NewestDeletePolicy, OldestDeletePolicy, ""} {
			ms := running(4)
			ms[1].Annotations = map[string]string{key: "yes"}
			if got := chooseVictims(ms, 1, policy); got[0].Name != "m1" {
				t.Errorf("%s, policy %q: deleted %s, want the annotated m1", key, policy, got[0].Name)
			}
		}
	}
}

func TestNewestAndOldest(t *testing.T) {
	if got := chooseVictims(running(4), 2, NewestDeletePolicy); got[0].Name != "m3" || got[1].Name != "m2" {
		t.Errorf("Newest chose %s, %s", got[0].Name, got[1].Name)
	}
	if got := chooseVictims(running(4), 2, OldestDeletePolicy); got[0].Name != "m0" || got[1].Name != "m1" {
		t.Errorf("Oldest chose %s, %s", got[0].Name, got[1].Name)
	}
}

// Random (also the default) picks among equally ranked Machines at random: over many scale
// downs every Machine is chosen, none much more often than the others; and a failed Machine
// still goes before healthy ones.
func TestRandomPolicy(t *testing.T) {
	const draws = 3000
	for _, policy := range []string{RandomDeletePolicy, ""} {
		counts := map[string]int{}
		for range draws {
			counts[chooseVictims(running(3), 1, policy)[0].Name]++
		}
		for _, name := range []string{"m0", "m1", "m2"} {
			// Expected 1000 each (standard deviation 26); the bounds are over 7 deviations away.
			if c := counts[name]; c < 800 || c > 1200 {
				t.Errorf("policy %q: %s chosen %d times of %d: %v", policy, name, c, draws, counts)
			}
		}
	}
	for range 100 {
		ms := running(3)
		ms[2].Status.Phase = ptr.To(machinev1beta1.PhaseFailed)
		if got := chooseVictims(ms, 1, RandomDeletePolicy); got[0].Name != "m2" {
			t.Fatalf("Random chose %s before the Failed m2", got[0].Name)
		}
	}
}

// The Machine API's tiers: marked for deletion (annotation with any value) or errored
// (errorReason, errorMessage or phase Failed) first, ordered among themselves by the policy;
// then, under Random only, Machines without a Node; then the rest. Under Newest and Oldest a
// Machine without a Node is ordered by its age like the rest.
func TestDeleteTiers(t *testing.T) {
	tiered := func() []*machinev1beta1.Machine {
		ms := running(6)
		ms[0].Status.NodeRef = nil
		ms[1].Status.ErrorReason = ptr.To(machinev1beta1.InvalidConfigurationMachineError)
		ms[2].Annotations = map[string]string{DeleteMachineAnnotation: ""}
		ms[4].Status.Phase = ptr.To(machinev1beta1.PhaseFailed)
		ms[5].Status.ErrorMessage = ptr.To("the instance is gone")
		return ms
	}
	for policy, want := range map[string]string{
		NewestDeletePolicy: "m5 m4 m2 m1 m3 m0",
		OldestDeletePolicy: "m1 m2 m4 m5 m0 m3",
	} {
		var got []string
		for _, m := range chooseVictims(tiered(), 6, policy) {
			got = append(got, m.Name)
		}
		if strings.Join(got, " ") != want {
			t.Errorf("%s chose %v, want %s", policy, got, want)
		}
	}
	for _, policy := range []string{RandomDeletePolicy, ""} {
		got := chooseVictims(tiered(), 6, policy)
		first := []string{got[0].Name, got[1].Name, got[2].Name, got[3].Name}
		slices.Sort(first)
		if strings.Join(first, " ") != "m1 m2 m4 m5" || got[4].Name != "m0" || got[5].Name != "m3" {
			t.Errorf("policy %q chose %s first, then %s, %s; want m1, m2, m4, m5 in any order, then m0 without a Node, then m3",
				policy, first, got[4].Name, got[5].Name)
		}
	}
}
