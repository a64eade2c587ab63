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

// rank returns how a delete policy ranks Machines (lower goes first), in the Machine API's
// tiers: marked for deletion (under either annotation, whatever its value) or errored go
// first; under Random, Machines without a Node go next (they serve no workload yet); then
// everything else. Under Newest and Oldest a Machine without a Node ranks with the rest:
// only its age counts.
func rank(policy string) func(*machinev1beta1.Machine) int {
	byNode := policy != NewestDeletePolicy && policy != OldestDeletePolicy
	return func(m *machinev1beta1.Machine) int {
		switch {
		case marked(m) || errored(m):
			return 0
		case byNode && m.Status.NodeRef == nil:
			return 1
		}
		return 2
	}
}

func marked(m *machinev1beta1.Machine) bool {
	_, marked := m.Annotations[DeleteMachineAnnotation]
	_, legacy := m.Annotations[LegacyDeleteMachineAnnotation]
	return marked || legacy
}

// errored reports an error the Machine controller recorded (errorReason or errorMessage),
// or the Failed phase that comes with one.
func errored(m *machinev1beta1.Machine) bool {
	return m.Status.ErrorReason != nil || m.Status.ErrorMessage != nil || ptr.Deref(m.Status.Phase, "") == machinev1beta1.PhaseFailed
}

// chooseVictims picks n Machines to delete: by rank, then by the delete policy (Random by
// default, a fresh draw each time; Newest or Oldest by creation time, the name breaking
// ties).
func chooseVictims(machines []*machinev1beta1.Machine, n int, policy string) []*machinev1beta1.Machine {
	return scaledown.Choose(machines, n, scaledown.Order(policy), rank(policy))
}
