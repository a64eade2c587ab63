// Package provisioncap limits how many Machines of one MachineSet are provisioning at once,
// for both APIs' MachineSet controllers. The limit is the MachineSet's
// machina.dev/max-provisioning annotation (a MachineDeployment's reaches its MachineSets,
// which copy its annotations); without it a scale-up creates every missing Machine at once.
// A Machine is provisioning from its creation until it has a Node, unless it is being
// deleted or has failed: a scale-up to 1000 with a limit of 50 keeps at most 50 instances
// launching and booting and creates the next Machine when one of them has its Node (kubernetes-sigs/cluster-api#8808 asks
// for the same of the Cluster API).
package provisioncap

import (
	"fmt"
	"strconv"
)

// Annotation is the key of a MachineSet's limit, a positive integer.
const Annotation = "machina.dev/max-provisioning"

// Limit reads the limit from a MachineSet's annotations: 0 when there is none. A value that
// is not a positive integer is an error naming the field; the caller reports it and creates
// as if there were no limit (admission refuses such a value where machina's policies are
// installed: config/admission/max-provisioning.yaml).
func Limit(annotations map[string]string) (int, error) {
	v, ok := annotations[Annotation]
	if !ok {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("metadata.annotations[%s]: Invalid value: %q: must be a positive integer (how many Machines may be provisioning at once)", Annotation, v)
	}
	return n, nil
}

// Creatable is how many of the missing Machines may be created now when provisioning
// Machines are already provisioning under limit (0: no limit).
func Creatable(missing, provisioning, limit int) int {
	if limit == 0 {
		return missing
	}
	return max(0, min(missing, limit-provisioning))
}

// InvalidReason is the reason of the Warning event about a limit that is not a positive
// integer.
const InvalidReason = "InvalidMaxProvisioning"

// Waiting completes a SuccessfulCreate event's message when waiting Machines were left for
// later by the limit: "" when none were.
func Waiting(waiting int, annotations map[string]string) string {
	if waiting <= 0 {
		return ""
	}
	return fmt.Sprintf("; %d more wait: at most %s provisioning at once (%s)", waiting, annotations[Annotation], Annotation)
}

// Limited says whether a MachineSet has a limit (valid or not). A limited set that waits
// for a Machine's Node is brought back as soon as that Node is linked, not after the second
// its controller otherwise lets a Machine's progress wait (coalesce.Delay): with a limit of
// 10, that second was most of each round of ten.
func Limited(annotations map[string]string) bool {
	_, ok := annotations[Annotation]
	return ok
}
