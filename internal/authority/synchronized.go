package authority

import (
	"sort"
	"strings"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/machina-dev/machina/internal/mapicond"
)

// SynchronizedCondition on a Machine API object says whether its mirror matches.
const SynchronizedCondition machinev1beta1.ConditionType = "Synchronized"

// Reasons of the Synchronized condition.
const (
	ConversionFailedReason = "ConversionFailed"
	SynchronizedReason     = "ResourceSynchronized"
	NoContextReason        = "ClusterNotReady"
	// MirrorWriteFailedReason: the apiserver refused a write of the other API's copy.
	MirrorWriteFailedReason = "MirrorWriteFailed"
	// TemplateNotFoundReason: the authoritative Cluster API MachineSet names an
	// InfraMachineTemplate that does not exist.
	TemplateNotFoundReason = "InfraMachineTemplateNotFound"
	// ClusterAPIMachineNotMirrorReason and ClusterAPIMachineSetNotMirrorReason: the Machine
	// API owns the resource, but a Cluster API resource of its name exists that is active
	// and is not the sync's mirror; the sync leaves it alone (NotMirror).
	ClusterAPIMachineNotMirrorReason    = "ClusterAPIMachineNotMirror"
	ClusterAPIMachineSetNotMirrorReason = "ClusterAPIMachineSetNotMirror"
)

// SetSynchronized records the outcome of a sync on a Machine API object's conditions.
func SetSynchronized(conds *[]machinev1beta1.Condition, reason string, errs field.ErrorList, detail error) bool {
	c := machinev1beta1.Condition{Type: SynchronizedCondition, Status: corev1.ConditionTrue, Reason: SynchronizedReason}
	switch {
	case len(errs) > 0:
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Error()
		}
		sort.Strings(msgs)
		c.Status, c.Reason, c.Severity = corev1.ConditionFalse, reason, machinev1beta1.ConditionSeverityError
		c.Message = strings.Join(msgs, "; ")
	case detail != nil:
		c.Status, c.Reason, c.Severity = corev1.ConditionFalse, reason, machinev1beta1.ConditionSeverityWarning
		c.Message = detail.Error()
	}
	return mapicond.Set(conds, c)
}
