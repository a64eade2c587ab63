package machine

import (
	"context"
	"time"

	"k8s.io/utils/ptr"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/requeue"
)

// reconcileNormal makes the instance exist and keeps the Machine's status current.
func (r *Reconciler) reconcileNormal(ctx context.Context, m *machinev1beta1.Machine) (ctrl.Result, error) {
	if phase(m) == machinev1beta1.PhaseFailed {
		// Failed is terminal: only deletion moves the Machine on.
		return ctrl.Result{}, nil
	}
	exists, err := r.Actuator.Exists(ctx, m)
	if err != nil {
		setInstanceExists(m, corev1.ConditionUnknown, "ErrorCheckingProvider", err.Error())
		return r.retry(m, "ErrorCheckingProvider", err)
	}
	if exists {
		setInstanceExists(m, corev1.ConditionTrue, "InstanceExists", "the instance exists")
		if err := r.Actuator.Update(ctx, m); err != nil {
			return r.retry(m, "UpdateError", err)
		}
		return r.afterProvisioned(m)
	}
	if provisionedBefore(m) {
		setInstanceExists(m, corev1.ConditionFalse, "InstanceMissing", "the instance was terminated outside of machina")
		r.fail(m, machinev1beta1.CreateMachineError, "Can't find created instance: it was deleted outside of machina")
		return ctrl.Result{}, nil
	}
	r.setPhaseQuietly(m, machinev1beta1.PhaseProvisioning)
	setInstanceExists(m, corev1.ConditionFalse, "InstanceNotCreated", "the instance is being created")
	if err := r.Actuator.Create(ctx, m); err != nil {
		events.Eventf(r.Recorder, m, corev1.EventTypeNormal, "PhaseProvisioning", "Machine %s is Provisioning", m.Name)
		return r.retry(m, "CreateError", err)
	}
	// One event tells of Provisioning and Provisioned when both happen in one pass.
	events.Eventf(r.Recorder, m, corev1.EventTypeNormal, "Created", "Created instance %s for Machine %s: Provisioning -> Provisioned",
		ptr.Deref(m.Spec.ProviderID, ""), m.Name)
	r.setPhaseQuietly(m, machinev1beta1.PhaseProvisioned)
	setCreation(m, corev1.ConditionTrue, "MachineCreationSucceeded", "the instance was created")
	setInstanceExists(m, corev1.ConditionTrue, "InstanceExists", "the instance exists")
	return r.afterProvisioned(m)
}

// afterProvisioned sets Provisioned or Running and decides when to look again.
func (r *Reconciler) afterProvisioned(m *machinev1beta1.Machine) (ctrl.Result, error) {
	clearError(m)
	if m.Status.NodeRef != nil {
		r.setPhase(m, machinev1beta1.PhaseRunning)
	} else {
		r.setPhase(m, machinev1beta1.PhaseProvisioned)
	}
	if m.Annotations[InstanceStateAnnotation] == "pending" {
		return ctrl.Result{RequeueAfter: pendingLook(m, time.Now())}, nil
	}
	// The Machines with a planned look are those whose instances resync; a look is a cloud
	// call (DescribeInstances on AWS), so the fleet's resyncs are spread.
	return ctrl.Result{RequeueAfter: requeue.Spread(r.Resync, DefaultResync, r.looks.count(), requeue.CloudLooks)}, nil
}

// pendingLook is when a booting instance is looked at again: every MaxPendingRequeue after
// its launch, as machine-api-operator's providers do, and PendingRequeue for one this
// controller did not see launched (found pending after a restart). Each look is a cloud call
// (DescribeInstances on AWS), and nothing waits on it: the Node's arrival brings the Machine
// back by itself (NodeLink's nodeRef), and the pass it brings finds the instance running.
// With instances that boot in 20 s, as EC2's do (mapi-scale -platform aws -boot 20s), a look
// every 2 s cost 12.55 EC2 calls per Machine; one 2 s after the launch and then every 20 s,
// 4.92; every 20 s from the launch (with looks a later pass superseded skipped: looks), 4.00.
func pendingLook(m *machinev1beta1.Machine, now time.Time) time.Duration {
	c := mapicond.Get(m.Status.Conditions, machinev1beta1.MachineCreation)
	if c == nil || c.Status != corev1.ConditionTrue {
		return PendingRequeue
	}
	return MaxPendingRequeue
}

// retry turns an actuator error into a terminal failure, a condition and a requeue, or a
// plain error (controller-runtime's exponential backoff).
func (r *Reconciler) retry(m *machinev1beta1.Machine, reason string, err error) (ctrl.Result, error) {
	if t, ok := asTerminal(err); ok {
		setCreation(m, corev1.ConditionFalse, string(t.Reason), t.Message)
		r.fail(m, t.Reason, t.Message)
		return ctrl.Result{}, nil
	}
	if rq, ok := asRequeue(err); ok {
		setCreation(m, corev1.ConditionFalse, rq.Reason, rq.Error())
		events.Eventf(r.Recorder, m, corev1.EventTypeWarning, rq.Reason, "%v", rq.Err)
		return ctrl.Result{RequeueAfter: rq.After}, nil
	}
	setCreation(m, corev1.ConditionFalse, reason, err.Error())
	events.Eventf(r.Recorder, m, corev1.EventTypeWarning, reason, "%v", err)
	return ctrl.Result{}, err
}

// provisionedBefore reports whether the Machine once had an instance: then a missing
// instance means it vanished, not that it is still to be created.
func provisionedBefore(m *machinev1beta1.Machine) bool {
	return (m.Spec.ProviderID != nil && *m.Spec.ProviderID != "") || len(m.Status.Addresses) > 0
}
