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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/events"
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

// ForSet is how many of a set's missing Machines its scale-up creates now: all of them, or as
// many as its limit leaves room for beside those of machines that are provisioning. When a
// Machine gets its Node the set is reconciled again and creates the next. A limit that is
// not a positive integer is reported on the set in a Warning event and ignored.
func ForSet[M any](rec record.EventRecorder, set client.Object, machines []M, provisioning func(M) bool, missing int) int {
	limit, err := Limit(set.GetAnnotations())
	if err != nil {
		events.Eventf(rec, set, corev1.EventTypeWarning, InvalidReason, "%v; creating without a limit", err)
		return missing
	}
	n := 0
	for _, m := range machines {
		if provisioning(m) {
			n++
		}
	}
	return Creatable(missing, n, limit)
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
