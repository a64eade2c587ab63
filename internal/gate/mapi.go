// Package gate is the one place every controller asks "may I reconcile this object?".
//
// Machine API controllers pass through the authority gate: status.authoritativeAPI on the
// Machine API object says which family owns it. Cluster API controllers (and the simulated
// provider's) pass through the paused gate: the cluster.x-k8s.io/paused annotation on the
// object or spec.paused on its Cluster. Either way the gate reports a Paused condition, so a
// user can see why nothing happens, and the migration controller can wait for it.
package gate

import (
	"fmt"
	"maps"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/mapicond"
)

// PausedCondition is the condition type both gates report.
const PausedCondition = "Paused"

// Reasons of the Paused condition.
const (
	// AuthoritativeAPIMachineAPIReason means the Machine API owns the object; not paused.
	AuthoritativeAPIMachineAPIReason = "AuthoritativeAPIMachineAPI"
	// AuthoritativeAPINotMachineAPIReason means Cluster API owns the object, or it is migrating.
	AuthoritativeAPINotMachineAPIReason = "AuthoritativeAPINotMachineAPI"
)

// The openshift/api MachineHealthCheck has no authoritativeAPI fields, so machina carries its
// authority in annotations: the request (like spec.authoritativeAPI) and the current
// authority (like status.authoritativeAPI, written by the sync and migration controllers).
const (
	MHCAuthoritativeAPIAnnotation       = "machina.dev/authoritative-api"
	MHCStatusAuthoritativeAPIAnnotation = "machina.dev/status-authoritative-api"
	// MHCSynchronizedAPIAnnotation is like status.synchronizedAPI: the last stable authority,
	// which is where a migration started from while the current authority is Migrating.
	MHCSynchronizedAPIAnnotation = "machina.dev/synchronized-api"
	// MHCSynchronizedGenerationAnnotation is like status.synchronizedGeneration: the
	// generation of the authoritative copy the sync controller last made the mirror equal to.
	MHCSynchronizedGenerationAnnotation = "machina.dev/synchronized-generation"
)

// SetMHCPaused makes a Machine API MachineHealthCheck carry the cluster.x-k8s.io/paused
// annotation while its authority (the MHCStatusAuthoritativeAPIAnnotation value) is not
// MachineAPI, and drop it when it is: machine-api-operator's MachineHealthCheck controller
// knows nothing of machina's authority annotations and honours only that one, so it would
// otherwise go on remediating beside the Cluster API's check. It reports whether the
// annotations changed.
func SetMHCPaused(o client.Object, authority machinev1beta1.MachineAuthority) bool {
	a := o.GetAnnotations()
	_, has := a[clusterv1.PausedAnnotation]
	want := authority != machinev1beta1.MachineAuthorityMachineAPI
	if has == want {
		return false
	}
	a = maps.Clone(a)
	if a == nil {
		a = map[string]string{}
	}
	if want {
		a[clusterv1.PausedAnnotation] = ""
	} else {
		delete(a, clusterv1.PausedAnnotation)
	}
	o.SetAnnotations(a)
	return true
}

// Decision is the gate's answer.
type Decision struct {
	// Paused is true when the controller must not act on the object beyond reporting.
	Paused bool
	// Authority is the effective status.authoritativeAPI (Machine API objects only).
	Authority machinev1beta1.MachineAuthority
	// Message explains the decision for the Paused condition and logs.
	Message string
	// Resumed is true when the object is not paused but its stored Paused condition still
	// says it is. The controller then ends its pass without acting, so that the end of the
	// pause is stored first (as Cluster API's paused helper does): a Paused=True must never
	// stand while a controller acts, or a migration could take a leftover for the
	// acknowledgement of its own pause. The write is locked (internal/patch), so it loses to
	// a migration that paused the object again meanwhile.
	Resumed bool
}

// InitialAuthority is the status.authoritativeAPI a Machine API Machine or MachineSet starts
// with, decided from its spec alone as machine-api-operator's controllers decide it: the
// authority the spec asks for, or MachineAPI when the spec asks for none. Every controller
// that initialises an empty status (the gate, the sync) uses this one rule, so whichever
// comes first, the answer is the same.
func InitialAuthority(spec machinev1beta1.MachineAuthority) machinev1beta1.MachineAuthority {
	if spec == "" {
		return machinev1beta1.MachineAuthorityMachineAPI
	}
	return spec
}

// MachineAPI applies the authority gate to a Machine API Machine or MachineSet, changing
// only its status: an empty status.authoritativeAPI is initialised (InitialAuthority), in
// every namespace and whether or not the sync runs, and the Paused condition is set. It
// reports whether the status changed, so the caller patches status only when needed.
//
// Objects without an authoritativeAPI field (MachineHealthCheck in openshift/api) are always
// reconciled by the Machine API; their Paused condition is set False.
func MachineAPI(obj client.Object) (Decision, bool, error) {
	spec, status, conds, err := authorityFields(obj)
	if err != nil {
		return Decision{}, false, err
	}
	changed := false
	if status != nil && *status == "" {
		*status = InitialAuthority(spec)
		changed = true
	}
	d := Decision{Authority: machinev1beta1.MachineAuthorityMachineAPI}
	if status != nil {
		d.Authority = *status
	}
	cond := machinev1beta1.Condition{Type: PausedCondition}
	switch d.Authority {
	case machinev1beta1.MachineAuthorityMachineAPI:
		d.Message = "status.authoritativeAPI is MachineAPI: the Machine API controllers reconcile this resource"
		cond.Status, cond.Reason = corev1.ConditionFalse, AuthoritativeAPIMachineAPIReason
		cond.Severity = machinev1beta1.ConditionSeverityInfo
	case machinev1beta1.MachineAuthorityMigrating:
		d.Paused = true
		d.Message = "status.authoritativeAPI is Migrating: authority is being handed over, nothing reconciles this resource until it is done"
		cond.Status, cond.Reason = corev1.ConditionTrue, AuthoritativeAPINotMachineAPIReason
	default:
		d.Paused = true
		d.Message = fmt.Sprintf("status.authoritativeAPI is %s: the Cluster API controllers reconcile this resource", d.Authority)
		cond.Status, cond.Reason = corev1.ConditionTrue, AuthoritativeAPINotMachineAPIReason
	}
	cond.Message = d.Message
	d.Resumed = !d.Paused && mapicond.IsTrue(*conds, PausedCondition)
	if mapicond.Set(conds, cond) {
		changed = true
	}
	return d, changed, nil
}

func authorityFields(obj client.Object) (spec machinev1beta1.MachineAuthority, status *machinev1beta1.MachineAuthority,
	conds *[]machinev1beta1.Condition, err error) {
	switch o := obj.(type) {
	case *machinev1beta1.Machine:
		return o.Spec.AuthoritativeAPI, &o.Status.AuthoritativeAPI, &o.Status.Conditions, nil
	case *machinev1beta1.MachineSet:
		return o.Spec.AuthoritativeAPI, &o.Status.AuthoritativeAPI, &o.Status.Conditions, nil
	case *machinev1beta1.MachineHealthCheck:
		// Read-only view of the annotation: only the sync controller decides it.
		st := machinev1beta1.MachineAuthority(o.Annotations[MHCStatusAuthoritativeAPIAnnotation])
		if st == "" {
			st = machinev1beta1.MachineAuthorityMachineAPI
		}
		return "", &st, &o.Status.Conditions, nil
	default:
		return "", nil, nil, fmt.Errorf("gate: %T is not a Machine API resource", obj)
	}
}
