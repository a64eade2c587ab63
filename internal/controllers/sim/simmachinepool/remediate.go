package simmachinepool

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/patch"
)

// RemediationInstanceUnhealthyReason means a ScaleOnly pool remediates by marking the instance
// Unhealthy in its group, which replaces it.
const RemediationInstanceUnhealthyReason = "InstanceMarkedUnhealthy"

// needsRemediation reports a Machine a MachineHealthCheck asked its owner to remediate.
func needsRemediation(m *clusterv1.Machine) bool {
	c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineOwnerRemediatedCondition)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == clusterv1.MachineOwnerRemediatedWaitingForRemediationReason
}

// remediate acts for the Machine's owner, the MachinePool: the Machine is deleted (drained
// like any other; its instance is terminated and the group replaces it). A ScaleOnly group
// cannot lose one instance on request, so the instance is marked Unhealthy and the group
// replaces it; the dangling Machine goes with it.
func (r *Reconciler) remediate(ctx context.Context, m *clusterv1.Machine, in api.GroupInstance, scaleOnly bool) error {
	cond := metav1.Condition{Type: clusterv1.MachineOwnerRemediatedCondition, Status: metav1.ConditionFalse,
		Reason: clusterv1.MachineSetMachineRemediationMachineDeletingReason, ObservedGeneration: m.Generation,
		Message: "the Machine is deleted; the scaling group replaces its instance"}
	if scaleOnly {
		if err := r.Cloud.SetInstanceHealth(ctx, in.InstanceID, api.HealthUnhealthy); err != nil && !isNotFound(err) {
			return err
		}
		cond.Reason = RemediationInstanceUnhealthyReason
		cond.Message = "instance " + in.InstanceID + " is marked Unhealthy; its scaling group replaces it"
	}
	if _, err := patch.LockedStatus(ctx, r.Client, m, func() bool {
		return meta.SetStatusCondition(&m.Status.Conditions, cond)
	}); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil // seen again on the next pass
		}
		return err
	}
	events.Eventf(r.Recorder, m, corev1.EventTypeNormal, "MachineRemediated", "Remediating unhealthy Machine %s: %s", m.Name,
		meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineOwnerRemediatedCondition).Message)
	if scaleOnly {
		return nil
	}
	return client.IgnoreNotFound(r.Client.Delete(ctx, m, client.Preconditions{UID: &m.UID}))
}
