package machineset

import (
	"math/rand/v2"
	"sort"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/utils/ptr"
)

// Delete policies of spec.deletePolicy.
const (
	RandomDeletePolicy = "Random"
	NewestDeletePolicy = "Newest"
	OldestDeletePolicy = "Oldest"
)

// LegacyDeleteMachineAnnotation is the older name of DeleteMachineAnnotation, still honoured.
const LegacyDeleteMachineAnnotation = "machine.openshift.io/cluster-api-delete-machine"

// priority ranks how strongly a Machine should go first: marked for deletion (under either
// annotation), then failed, then without a Node (it serves no workload yet), then
// everything else.
func priority(m *machinev1beta1.Machine) int {
	_, marked := m.Annotations[DeleteMachineAnnotation]
	_, legacy := m.Annotations[LegacyDeleteMachineAnnotation]
	if marked || legacy {
		return 3
	}
	if ptr.Deref(m.Status.Phase, "") == machinev1beta1.PhaseFailed || m.Status.ErrorReason != nil {
		return 2
	}
	if m.Status.NodeRef == nil {
		return 1
	}
	return 0
}

// chooseVictims picks n Machines to delete: by priority, then by the delete policy
// (Random by default; Newest or Oldest by creation time).
func chooseVictims(machines []*machinev1beta1.Machine, n int, policy string) []*machinev1beta1.Machine {
	ms := append([]*machinev1beta1.Machine{}, machines...)
	tiebreak := make(map[*machinev1beta1.Machine]float64, len(ms))
	for _, m := range ms {
		tiebreak[m] = rand.Float64()
	}
	sort.SliceStable(ms, func(i, j int) bool {
		a, b := ms[i], ms[j]
		if pa, pb := priority(a), priority(b); pa != pb {
			return pa > pb
		}
		ta, tb := a.CreationTimestamp.Time, b.CreationTimestamp.Time
		switch policy {
		case NewestDeletePolicy:
			if !ta.Equal(tb) {
				return ta.After(tb)
			}
			return a.Name > b.Name
		case OldestDeletePolicy:
			if !ta.Equal(tb) {
				return ta.Before(tb)
			}
			return a.Name < b.Name
		default:
			return tiebreak[a] < tiebreak[b]
		}
	})
	if n > len(ms) {
		n = len(ms)
	}
	return ms[:n]
}
