package simmachine

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
)

// RecordingInstanceReason is the Paused condition's reason while a pause waits for the
// SimMachine to name an instance an earlier pass may have launched.
const RecordingInstanceReason = "RecordingInstance"

// reconcilePaused reports the pause. A migration takes Paused=True on an InfraMachine as the
// promise that its provider has nothing in flight and nothing unrecorded, so before the first
// report of a pause, a SimMachine that may have launched an instance without recording it (a
// pass killed between the launch and the write) is looked up by its tag and the instance
// recorded in spec.providerID; otherwise the other API would launch a second instance for
// the same Machine. Until that lookup succeeds, Paused stays False.
func (r *Reconciler) reconcilePaused(ctx context.Context, sm *infrav1.SimMachine, wasPaused bool) (ctrl.Result, error) {
	if wasPaused || sm.Spec.ProviderID != "" || !controllerutil.ContainsFinalizer(sm, infrav1.SimMachineFinalizer) {
		return ctrl.Result{}, nil
	}
	inst, err := r.findByTag(ctx, sm)
	if err != nil {
		meta.SetStatusCondition(&sm.Status.Conditions, metav1.Condition{Type: clusterv1.PausedCondition,
			Status: metav1.ConditionFalse, Reason: RecordingInstanceReason, ObservedGeneration: sm.Generation,
			Message: fmt.Sprintf("pausing once the instance an earlier pass may have launched is recorded: %v", err)})
		return ctrl.Result{RequeueAfter: PendingRequeue}, nil
	}
	if inst != nil {
		r.apply(sm, inst)
	}
	return ctrl.Result{}, nil
}
