package migration

import (
	"context"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/patch"
)

// DeletedWhileMigratingReason means a copy was deleted mid-handover, which then ended on the
// side whose controller still guarded the instance.
const DeletedWhileMigratingReason = "DeletedWhileMigrating"

// settleDeletion ends the handover of a Machine one of whose copies is being deleted, so that
// exactly one side's controller acts on the deletion: the side whose controller finalizer is
// still on its copy (the old side when both are; the new side when neither is any more; the
// API server refuses new finalizers on an object being deleted, so the handover cannot go
// on), except that a Cluster API side the handover has already unpaused is the one acting.
// The other side lets go of the instance and is paused, then the authority names the chosen
// side; the sync then carries the deletion over by the usual rules.
func (r *MachineReconciler) settleDeletion(ctx context.Context, s *machineSubject) (ctrl.Result, error) {
	to := deletionSide(s)
	if to == machinev1beta1.MachineAuthorityMachineAPI {
		if err := s.pauseCAPI(ctx, r.client, true); err != nil {
			return ctrl.Result{}, err
		}
		if ok, err := r.instanceHanded(ctx, s); err != nil || !ok {
			return ctrl.Result{RequeueAfter: time.Second}, err
		}
		if err := s.releaseCAPI(ctx, r.client); err != nil {
			return ctrl.Result{}, err
		}
	} else {
		// The InfraMachine's provider must terminate the instance: guard it before the
		// Machine API lets go (see moveFinalizers).
		if _, err := s.guardInfra(ctx, r.client); err != nil {
			return ctrl.Result{}, err
		}
		if _, err := removeFinalizers(ctx, r.client, s.mapi, machinev1beta1.MachineFinalizer); err != nil {
			return ctrl.Result{}, err
		}
		if err := s.resumeCAPI(ctx, r.client); err != nil {
			return ctrl.Result{}, err
		}
	}
	settled := condition(corev1.ConditionTrue, DeletedWhileMigratingReason,
		"deleted during the handover; "+string(to)+" carries the deletion out")
	if err := s.setAuthority(ctx, r.client, to, to, s.generation(to), settled); err != nil {
		return ctrl.Result{}, err
	}
	r.event(s.mapi, corev1.EventTypeNormal, DeletedWhileMigratingReason, "Deleted during the handover; %s carries the deletion out", to)
	r.pending.forget(client.ObjectKeyFromObject(s.mapi))
	return ctrl.Result{}, nil
}

// instanceHanded reports whether the Machine API side, which is to carry the deletion out,
// knows the instance: an InfraMachine its provider has acted on (unpaused during a handover
// from the Machine API, it may have launched one) is let go only once the provider has
// acknowledged its pause again — it then records whatever it launched — and the Machine API
// copy names that instance (handInstance); otherwise the instance would outlive both copies.
func (r *MachineReconciler) instanceHanded(ctx context.Context, s *machineSubject) (bool, error) {
	if ok, why, err := s.infraPaused(ctx, r.client); err != nil || !ok {
		if err == nil {
			_, err = r.setCondition(ctx, s, corev1.ConditionFalse, WaitingForPausedReason, "deleted during the handover; waiting for the provider to pause before the Machine API carries the deletion out: "+why)
		}
		return false, err
	}
	if _, err := s.handInstance(ctx, r.client); err != nil {
		return false, r.stepFailed(ctx, s, "giving the Machine API copy its instance", err)
	}
	return true, nil
}

// deletionSide is the side that acts on a deletion that interrupted a handover. Going to the
// Cluster API, its copies are unpaused (with their finalizers) before the Machine API's
// finalizer goes: once the Cluster API Machine is unpaused, that side is the one acting, and
// its controller may already have carried the deletion out and let go.
func deletionSide(s *machineSubject) machinev1beta1.MachineAuthority {
	_, _, previous := s.authorities()
	mapiHolds := controllerutil.ContainsFinalizer(s.mapi, machinev1beta1.MachineFinalizer)
	capiHolds := s.capi != nil && controllerutil.ContainsFinalizer(s.capi, clusterv1.MachineFinalizer)
	switch {
	case previous == machinev1beta1.MachineAuthorityMachineAPI && s.capi != nil && !gate.HasPausedAnnotation(s.capi):
		return machinev1beta1.MachineAuthorityClusterAPI
	case mapiHolds && (previous == machinev1beta1.MachineAuthorityMachineAPI || !capiHolds):
		return machinev1beta1.MachineAuthorityMachineAPI
	case capiHolds:
		return machinev1beta1.MachineAuthorityClusterAPI
	}
	// Neither holds: the handover had put the new side's finalizer on last, and that side's
	// controller has taken it off again because it has carried the deletion out. Handing the
	// Machine back to the old side would have the sync take the deletion for a mirror deleted
	// by hand and recreate it.
	if previous == machinev1beta1.MachineAuthorityMachineAPI {
		return machinev1beta1.MachineAuthorityClusterAPI
	}
	return machinev1beta1.MachineAuthorityMachineAPI
}

// releaseCAPI takes the Cluster API controllers' finalizers off the paused copies: the Machine
// API side carries the deletion out.
func (s *machineSubject) releaseCAPI(ctx context.Context, c client.Client) error {
	if s.capi != nil {
		if _, err := removeFinalizers(ctx, c, s.capi, clusterv1.MachineFinalizer); err != nil {
			return err
		}
	}
	if s.infra != nil {
		if _, err := removeFinalizers(ctx, c, s.infra, s.infraFinalizers...); err != nil {
			return err
		}
	}
	return nil
}

// resumeCAPI unpauses the Cluster API copies even while they are being deleted: their
// controllers carry the deletion out.
func (s *machineSubject) resumeCAPI(ctx context.Context, c client.Client) error {
	for _, o := range []client.Object{s.capi, s.infra} {
		if o == nil || isNil(o) {
			continue
		}
		_, err := patch.Locked(ctx, c, o, func() bool { return authority.SetPaused(o, false) })
		if err := client.IgnoreNotFound(err); err != nil {
			return err
		}
	}
	return nil
}
