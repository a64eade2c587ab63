package machine

import (
	"context"
	"fmt"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/mapicond"
)

// RecordingInstanceReason is the Paused condition's reason while a pause waits for the
// Machine to name an instance an earlier pass may have launched.
const RecordingInstanceReason = "RecordingInstance"

// reconcilePaused reports the pause the gate decided. A migration takes Paused=True as the
// promise that this side has nothing in flight and nothing unrecorded, and lets the other
// API's controllers act next. So before the first report of a pause, a Machine that may
// have launched an instance without naming it (a pass killed between the cloud's launch and
// the status write, or one whose write lost to the migration's own) is looked up in the
// cloud by its idempotency token and the instance recorded; otherwise the other API would
// launch a second instance for the same Machine. Until that lookup succeeds, Paused stays
// False with RecordingInstanceReason.
func (r *Reconciler) reconcilePaused(ctx context.Context, m *machinev1beta1.Machine, wasPaused bool) (ctrl.Result, error) {
	if wasPaused || !mayHaveUnrecordedInstance(m) {
		return ctrl.Result{}, nil
	}
	exists, err := r.Actuator.Exists(ctx, m)
	if err == nil && exists {
		err = r.Actuator.Update(ctx, m)
	}
	if err != nil {
		mapicond.Set(&m.Status.Conditions, machinev1beta1.Condition{Type: gate.PausedCondition, Status: corev1.ConditionFalse,
			Reason: RecordingInstanceReason, Severity: machinev1beta1.ConditionSeverityInfo,
			Message: fmt.Sprintf("pausing once the instance an earlier pass may have launched is recorded: %v", err)})
		return ctrl.Result{RequeueAfter: PendingRequeue}, nil
	}
	return ctrl.Result{}, nil
}

// mayHaveUnrecordedInstance: the controller stores its finalizer before it launches, and
// records the instance in spec.providerID once launched.
func mayHaveUnrecordedInstance(m *machinev1beta1.Machine) bool {
	return ptr.Deref(m.Spec.ProviderID, "") == "" && controllerutil.ContainsFinalizer(m, machinev1beta1.MachineFinalizer)
}
