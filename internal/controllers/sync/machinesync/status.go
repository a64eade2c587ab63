package machinesync

import (
	"context"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capierrors "sigs.k8s.io/cluster-api/api/deprecated/errors"

	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/patch"
)

// MirroredReason marks conditions a paused Cluster API copy carries from the Machine API.
const MirroredReason = "MirroredFromMachineAPI"

// statusToCAPI reflects the authoritative Machine API status on the paused Cluster API copy.
func (r *Reconciler) statusToCAPI(ctx context.Context, mapi *machinev1beta1.Machine, capi *clusterv1.Machine) error {
	base := capi.DeepCopy()
	capi.Status.Phase = capiPhase(ptr.Deref(mapi.Status.Phase, ""))
	capi.Status.NodeRef = clusterv1.MachineNodeReference{}
	if mapi.Status.NodeRef != nil {
		capi.Status.NodeRef.Name = mapi.Status.NodeRef.Name
	}
	capi.Status.Addresses = nil
	for _, a := range mapi.Status.Addresses {
		capi.Status.Addresses = append(capi.Status.Addresses, clusterv1.MachineAddress{Type: clusterv1.MachineAddressType(a.Type), Address: a.Address})
	}
	provisioned := mapi.Spec.ProviderID != nil && *mapi.Spec.ProviderID != ""
	capi.Status.Initialization.InfrastructureProvisioned = ptr.To(provisioned)
	// The zone the instance runs in, as the Cluster API Machine controller reports it for a
	// Machine it runs (kubectl's FAILURE DOMAIN column): the actuator's zone label, else the
	// one asked for.
	capi.Status.FailureDomain = capi.Spec.FailureDomain
	if z := mapi.Labels[convert.MachineAPIZoneLabel]; z != "" {
		capi.Status.FailureDomain = z
	}
	// Ready and Available are what Cluster API MachineSets and health checks count; a paused
	// copy reports them from the Machine API's view.
	phase := ptr.Deref(mapi.Status.Phase, "")
	status, msg := metav1.ConditionFalse, "the Machine API reports phase "+phase
	if phase == machinev1beta1.PhaseRunning && mapi.Status.NodeRef != nil {
		status, msg = metav1.ConditionTrue, "the Machine API reports it Running with Node "+mapi.Status.NodeRef.Name
	}
	for _, t := range []string{clusterv1.MachineReadyCondition, clusterv1.MachineAvailableCondition} {
		meta.SetStatusCondition(&capi.Status.Conditions, metav1.Condition{Type: t, Status: status,
			Reason: MirroredReason, Message: msg, ObservedGeneration: capi.Generation})
	}
	// UP-TO-DATE: the Machine API rolls nothing out (its MachineSets never replace a Machine
	// for a template change), so a Machine API Machine is its own spec, as a Cluster API
	// Machine without a MachineSet is.
	meta.SetStatusCondition(&capi.Status.Conditions, metav1.Condition{Type: clusterv1.MachineUpToDateCondition,
		Status: metav1.ConditionTrue, Reason: clusterv1.MachineUpToDateReason, ObservedGeneration: capi.Generation,
		Message: "the Machine API rolls nothing out: the Machine is what its Machine API spec says"})
	failureToCAPI(mapi, capi)
	if equality.Semantic.DeepEqual(base.Status, capi.Status) {
		return nil
	}
	// Locked: the paused Cluster API Machine controller writes the same conditions list (its
	// Paused condition), and a merge patch replaces the whole list.
	return patch.StoreStatus(ctx, r.Client, capi, base)
}

// statusToMAPI reflects the authoritative Cluster API status on the Machine API copy.
func statusToMAPI(mapi *machinev1beta1.Machine, capi *clusterv1.Machine) {
	if p := mapiPhase(capi.Status.Phase); p != "" {
		mapi.Status.Phase = ptr.To(p)
	}
	// A reference to the same Node keeps what the Cluster API does not record (its UID).
	if n := capi.Status.NodeRef.Name; n == "" {
		mapi.Status.NodeRef = nil
	} else if mapi.Status.NodeRef == nil || mapi.Status.NodeRef.Name != n {
		mapi.Status.NodeRef = &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: n}
	}
	mapi.Status.Addresses = nil
	for _, a := range capi.Status.Addresses {
		mapi.Status.Addresses = append(mapi.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeAddressType(a.Type), Address: a.Address})
	}
	instanceExistsToMAPI(mapi, capi)
	// A terminal failure the Cluster API records shows where `oc get machines` users read it.
	mapi.Status.ErrorReason, mapi.Status.ErrorMessage = nil, nil
	if d := capi.Status.Deprecated; d != nil && d.V1Beta1 != nil {
		if d.V1Beta1.FailureReason != nil {
			mapi.Status.ErrorReason = ptr.To(machinev1beta1.MachineStatusError(*d.V1Beta1.FailureReason))
		}
		if d.V1Beta1.FailureMessage != nil {
			mapi.Status.ErrorMessage = ptr.To(*d.V1Beta1.FailureMessage)
		}
	}
}

// instanceExistsToMAPI sets the InstanceExists condition a Machine API Machine controller
// keeps, from what the Cluster API side records: True once the Cluster API Machine names an
// instance (spec.providerID, which its provider recorded), False (InstanceNotCreated) before.
func instanceExistsToMAPI(mapi *machinev1beta1.Machine, capi *clusterv1.Machine) {
	c := machinev1beta1.Condition{Type: machinev1beta1.InstanceExistsCondition, Status: corev1.ConditionFalse,
		Reason: machinev1beta1.InstanceNotCreatedReason, Message: "the Cluster API Machine names no instance yet"}
	if id := capi.Spec.ProviderID; id != "" {
		c.Status, c.Reason, c.Message = corev1.ConditionTrue, string(machinev1beta1.InstanceExistsCondition),
			"the Cluster API Machine names instance "+id
	}
	mapicond.Set(&mapi.Status.Conditions, c)
}

// failureToCAPI records a Machine API Machine's terminal failure (errorReason, errorMessage)
// on its paused Cluster API copy where the Cluster API keeps one (status.deprecated.v1beta1
// failureReason and failureMessage): a health check the Cluster API owns then finds the
// Machine unhealthy at once, as the Machine API's own check would, instead of after its Node
// timeouts. It is cleared with the failure.
func failureToCAPI(mapi *machinev1beta1.Machine, capi *clusterv1.Machine) {
	var reason *capierrors.MachineStatusError
	if mapi.Status.ErrorReason != nil {
		reason = ptr.To(capierrors.MachineStatusError(*mapi.Status.ErrorReason))
	}
	var msg *string
	if mapi.Status.ErrorMessage != nil {
		msg = ptr.To(*mapi.Status.ErrorMessage)
	}
	d := capi.Status.Deprecated
	if reason == nil && msg == nil && (d == nil || d.V1Beta1 == nil) {
		return
	}
	if d == nil {
		d = &clusterv1.MachineDeprecatedStatus{}
		capi.Status.Deprecated = d
	}
	if d.V1Beta1 == nil {
		d.V1Beta1 = &clusterv1.MachineV1Beta1DeprecatedStatus{}
	}
	d.V1Beta1.FailureReason, d.V1Beta1.FailureMessage = reason, msg
}

func capiPhase(p string) string {
	switch p {
	case machinev1beta1.PhaseProvisioning:
		return string(clusterv1.MachinePhaseProvisioning)
	case machinev1beta1.PhaseProvisioned:
		return string(clusterv1.MachinePhaseProvisioned)
	case machinev1beta1.PhaseRunning:
		return string(clusterv1.MachinePhaseRunning)
	case machinev1beta1.PhaseDeleting:
		return string(clusterv1.MachinePhaseDeleting)
	case machinev1beta1.PhaseFailed:
		return string(clusterv1.MachinePhaseFailed)
	}
	return string(clusterv1.MachinePhasePending)
}

func mapiPhase(p string) string {
	switch clusterv1.MachinePhase(p) {
	case clusterv1.MachinePhasePending, clusterv1.MachinePhaseProvisioning:
		return machinev1beta1.PhaseProvisioning
	case clusterv1.MachinePhaseProvisioned:
		return machinev1beta1.PhaseProvisioned
	case clusterv1.MachinePhaseRunning:
		return machinev1beta1.PhaseRunning
	case clusterv1.MachinePhaseDeleting, clusterv1.MachinePhaseDeleted:
		return machinev1beta1.PhaseDeleting
	case clusterv1.MachinePhaseFailed:
		return machinev1beta1.PhaseFailed
	}
	return ""
}
