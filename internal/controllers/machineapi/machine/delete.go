package machine

import (
	"context"
	"fmt"
	"strings"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/drain"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/mapicond"
)

// Reasons of the deletion conditions.
const (
	HookPresentReason   = "HookPresent"
	DrainBlockedReason  = "DrainBlocked"
	DrainFinishedReason = "Drained"
	DrainSkippedReason  = "DrainSkipped"
	NoNodeReason        = "NoNode"
)

// reconcileDelete walks the deletion steps in order; each step that is not done yet
// reports why in a condition and returns.
func (r *Reconciler) reconcileDelete(ctx context.Context, m *machinev1beta1.Machine) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(m, machinev1beta1.MachineFinalizer) {
		return ctrl.Result{}, nil
	}
	r.setPhase(m, machinev1beta1.PhaseDeleting)

	// Step 0: the Machine whose Node runs this manager waits for the override annotation
	// (or for the manager to move).
	if held, err := r.protectsManager(ctx, m); err != nil || held {
		if held {
			r.holdForManager(m)
		}
		return ctrl.Result{}, err
	}

	// Step 1: pre-drain hooks hold the drain.
	if hooks := m.Spec.LifecycleHooks.PreDrain; len(hooks) > 0 {
		setCondition(m, machinev1beta1.MachineDrainable, corev1.ConditionFalse, HookPresentReason,
			"drain is held by preDrain hook(s) "+hookNames(hooks))
		return ctrl.Result{}, nil
	}
	setCondition(m, machinev1beta1.MachineDrainable, corev1.ConditionTrue, "", "")

	// Step 2: drain the Node through the Eviction API.
	if res, err := r.drainStep(ctx, m); err != nil || !res.IsZero() {
		return res, err
	}

	// Step 3: pre-terminate hooks hold the instance's deletion.
	if hooks := m.Spec.LifecycleHooks.PreTerminate; len(hooks) > 0 {
		setCondition(m, machinev1beta1.MachineTerminable, corev1.ConditionFalse, HookPresentReason,
			"instance deletion is held by preTerminate hook(s) "+hookNames(hooks))
		return ctrl.Result{}, nil
	}
	setCondition(m, machinev1beta1.MachineTerminable, corev1.ConditionTrue, "", "")

	// Step 4: delete the instance and wait until it is gone.
	exists, err := r.Actuator.Exists(ctx, m)
	if err != nil {
		return r.retryDelete(m, err)
	}
	if exists {
		if err := r.Actuator.Delete(ctx, m); err != nil {
			return r.retryDelete(m, err)
		}
		setInstanceExists(m, corev1.ConditionTrue, "InstanceDeleting", "waiting for the instance to terminate")
		return ctrl.Result{RequeueAfter: PendingRequeue}, nil
	}
	setInstanceExists(m, corev1.ConditionFalse, "InstanceTerminated", "the instance is terminated")

	// Step 5: delete the Node.
	if ref := m.Status.NodeRef; ref != nil {
		err := r.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: ref.Name}})
		if err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("deleting Node %s: %w", ref.Name, err)
		}
	}

	// Step 6: let the Machine go.
	controllerutil.RemoveFinalizer(m, machinev1beta1.MachineFinalizer)
	events.Eventf(r.Recorder, m, corev1.EventTypeNormal, "Deleted", "Deleted the instance and Node of Machine %s", m.Name)
	return ctrl.Result{}, nil
}

func (r *Reconciler) drainStep(ctx context.Context, m *machinev1beta1.Machine) (ctrl.Result, error) {
	if mapicond.IsTrue(m.Status.Conditions, machinev1beta1.MachineDrained) {
		return ctrl.Result{}, nil
	}
	switch {
	case m.Status.NodeRef == nil:
		setCondition(m, machinev1beta1.MachineDrained, corev1.ConditionTrue, NoNodeReason, "the Machine has no Node")
		return ctrl.Result{}, nil
	case hasAnnotation(m, ExcludeNodeDrainingAnnotation):
		setCondition(m, machinev1beta1.MachineDrained, corev1.ConditionTrue, DrainSkippedReason,
			"drain skipped: the Machine has the "+ExcludeNodeDrainingAnnotation+" annotation")
		events.Eventf(r.Recorder, m, corev1.EventTypeNormal, DrainSkippedReason, "Skipped draining Node %s", m.Status.NodeRef.Name)
		return ctrl.Result{}, nil
	}
	res, err := drain.Drain(ctx, r.Client, r.APIReader, m.Status.NodeRef.Name)
	if err != nil {
		setCondition(m, machinev1beta1.MachineDrained, corev1.ConditionFalse, "DrainError", err.Error())
		return ctrl.Result{}, err
	}
	if !res.Done {
		setCondition(m, machinev1beta1.MachineDrained, corev1.ConditionFalse, DrainBlockedReason, res.Summary())
		if len(res.Blocked) > 0 {
			events.Eventf(r.Recorder, m, corev1.EventTypeWarning, DrainBlockedReason, "Draining Node %s: %s", m.Status.NodeRef.Name, res.Summary())
		}
		return ctrl.Result{RequeueAfter: DrainRequeue}, nil
	}
	setCondition(m, machinev1beta1.MachineDrained, corev1.ConditionTrue, DrainFinishedReason, "the Node is drained")
	events.Eventf(r.Recorder, m, corev1.EventTypeNormal, DrainFinishedReason, "Drained Node %s", m.Status.NodeRef.Name)
	return ctrl.Result{}, nil
}

func (r *Reconciler) retryDelete(m *machinev1beta1.Machine, err error) (ctrl.Result, error) {
	if rq, ok := asRequeue(err); ok {
		setInstanceExists(m, corev1.ConditionUnknown, rq.Reason, rq.Error())
		return ctrl.Result{RequeueAfter: rq.After}, nil
	}
	setInstanceExists(m, corev1.ConditionUnknown, "DeleteError", err.Error())
	events.Eventf(r.Recorder, m, corev1.EventTypeWarning, "DeleteError", "%v", err)
	return ctrl.Result{}, err
}

func hookNames(hooks []machinev1beta1.LifecycleHook) string {
	names := make([]string, len(hooks))
	for i, h := range hooks {
		names[i] = h.Name + " (owner " + h.Owner + ")"
	}
	return strings.Join(names, ", ")
}

func hasAnnotation(m *machinev1beta1.Machine, key string) bool {
	_, ok := m.Annotations[key]
	return ok
}
