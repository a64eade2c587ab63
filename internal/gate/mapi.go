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

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
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

// MachineAPI applies the authority gate to a Machine API Machine or MachineSet, changing
// only its status: an empty status.authoritativeAPI is initialised (authority.InitialAuthority), in
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
		*status = authority.InitialAuthority(spec)
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
		st := machinev1beta1.MachineAuthority(o.Annotations[authority.MHCStatusAuthoritativeAPIAnnotation])
		if st == "" {
			st = machinev1beta1.MachineAuthorityMachineAPI
		}
		return "", &st, &o.Status.Conditions, nil
	default:
		return "", nil, nil, fmt.Errorf("gate: %T is not a Machine API resource", obj)
	}
}
