package machineset

import (
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/machina-dev/machina/internal/controllers/internal/scaledown"
)

// Delete policies of spec.deletePolicy.
const (
	RandomDeletePolicy = string(scaledown.Random)
	NewestDeletePolicy = string(scaledown.Newest)
	OldestDeletePolicy = string(scaledown.Oldest)
)

// LegacyDeleteMachineAnnotation is the older name of DeleteMachineAnnotation, still honoured.
const LegacyDeleteMachineAnnotation = "machine.openshift.io/cluster-api-delete-machine"

// priority ranks how strongly a Machine should go first (lower goes first): marked for
// deletion (under either annotation), then failed, then without a Node (it serves no workload
// yet), then everything else.
func priority(m *machinev1beta1.Machine) int {
	_, marked := m.Annotations[DeleteMachineAnnotation]
	_, legacy := m.Annotations[LegacyDeleteMachineAnnotation]
	if marked || legacy {
		return 0
	}
	if ptr.Deref(m.Status.Phase, "") == machinev1beta1.PhaseFailed || m.Status.ErrorReason != nil {
		return 1
	}
	if m.Status.NodeRef == nil {
		return 2
	}
	return 3
}

// chooseVictims picks n Machines to delete: by priority, then by the delete policy
// (Random by default; Newest or Oldest by creation time, the name breaking ties).
func chooseVictims(machines []*machinev1beta1.Machine, n int, policy string) []*machinev1beta1.Machine {
	return scaledown.Choose(machines, n, scaledown.Order(policy), priority)
}
