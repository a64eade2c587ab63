package ocpconfig

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/patch"
)

// ClusterOperatorName is the ClusterOperator the groups report on: machine-api-operator's,
// which seed 000 names as where the sync's wider failures show.
const ClusterOperatorName = "machine-api"

// The condition types machina writes on the ClusterOperator, one per group. The cluster
// version operator reads only Available, Progressing, Degraded and Upgradeable, which
// machine-api-operator writes; machina's are informational (oc get clusteroperator
// machine-api -o yaml, oc adm inspect, must-gather), named in library-go's <Part>Degraded way.
const (
	SyncCondition      configv1.ClusterStatusConditionType = "MachinaSyncDegraded"
	MigrationCondition configv1.ClusterStatusConditionType = "MachinaMigrationDegraded"
)

// Reasons of machina's ClusterOperator conditions.
const (
	// AsExpectedReason: the group runs and finds nothing wrong.
	AsExpectedReason = "AsExpected"
	// NotSynchronizedReason: Machine API resources report Synchronized=False.
	NotSynchronizedReason = "NotSynchronized"
	// MigrationStuckReason: authority migrations have been open longer than StuckAfter.
	MigrationStuckReason = "MigrationStuck"
	// MachineAPIMigrationDisabledReason: the FeatureGate does not enable MachineAPIMigration,
	// so the group's controllers do not run.
	MachineAPIMigrationDisabledReason = "MachineAPIMigrationDisabled"
	// StartingReason: the gate has just been enabled; the controllers are starting (or, if
	// the gate had stopped them, the manager is restarting to start them).
	StartingReason = "Starting"
	// FeatureGateUndeterminedReason: no entry of the FeatureGate's status could be chosen, so
	// the group's controllers do not run.
	FeatureGateUndeterminedReason = "FeatureGateUndetermined"
)

// +kubebuilder:rbac:groups=config.openshift.io,resources=clusteroperators,verbs=get
// +kubebuilder:rbac:groups=config.openshift.io,resources=clusteroperators/status,verbs=patch

// Health is what a group found, for its condition: Degraded with the reason and message.
type Health struct {
	Degraded        bool
	Reason, Message string
}

// Reporter writes one group's condition on ClusterOperator "machine-api" every period, while
// the manager is the leader. It changes only its own condition: the patch carries the
// conditions list as read with the object's resourceVersion (internal/patch), so a write
// racing machine-api-operator's fails with a conflict and is made again from a fresh read,
// and nothing is written when the condition already says the same. A cluster without that
// ClusterOperator (or without the kind) gets nothing: machina never creates it.
type Reporter struct {
	Client    client.Client // writes
	Reader    client.Reader // reads the ClusterOperator from the API server
	Gate      *Gate
	Condition configv1.ClusterStatusConditionType
	// Health says how the group is doing while the gate lets it run.
	Health func(context.Context) (Health, error)
	Period time.Duration

	log     logr.Logger
	missing bool // the ClusterOperator was not there at the last look
}

// NeedLeaderElection is true: only the leader writes.
func (r *Reporter) NeedLeaderElection() bool { return true }

// Start reports until ctx ends: once at once, then every Period.
func (r *Reporter) Start(ctx context.Context) error {
	r.log = ctrl.Log.WithName("ocpconfig").WithValues("condition", r.Condition)
	t := time.NewTicker(r.Period)
	defer t.Stop()
	for {
		if err := r.Report(ctx); err != nil && ctx.Err() == nil {
			r.log.Error(err, "reporting on ClusterOperator "+ClusterOperatorName)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Report writes the condition once (or nothing, when the ClusterOperator is absent or the
// condition unchanged). A conflict with another writer (machine-api-operator, the other
// group's Reporter) is answered at once with a fresh read.
func (r *Reporter) Report(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error { return r.report(ctx) })
}

func (r *Reporter) report(ctx context.Context) error {
	co := &configv1.ClusterOperator{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Name: ClusterOperatorName}, co); absent(err) {
		if !r.missing {
			r.log.V(1).Info("no ClusterOperator " + ClusterOperatorName + " to report on")
		}
		r.missing = true
		return nil
	} else if err != nil {
		return err
	}
	r.missing = false
	cond, err := r.condition(ctx)
	if err != nil {
		return err
	}
	_, err = patch.LockedStatus(ctx, r.Client, co, func() bool { return SetCondition(&co.Status.Conditions, cond) })
	return err
}

// condition is the group's condition now.
func (r *Reporter) condition(ctx context.Context) (configv1.ClusterOperatorStatusCondition, error) {
	c := configv1.ClusterOperatorStatusCondition{Type: r.Condition, Status: configv1.ConditionFalse}
	s := r.Gate.State()
	running := r.Gate.Running() && s.Operate()
	if !running {
		c.Reason = MachineAPIMigrationDisabledReason
		if s.Undetermined() {
			c.Reason = FeatureGateUndeterminedReason
		}
		c.Message = fmt.Sprintf("%s: machina's %s controllers do not run", s.Why, r.Gate.group)
		if s.Operate() { // the gate has just opened, or opened again after stopping them
			c.Reason = StartingReason
			c.Message = fmt.Sprintf("%s: machina's %s controllers are starting", s.Why, r.Gate.group)
		}
		return c, nil
	}
	h, err := r.Health(ctx)
	if err != nil {
		return c, err
	}
	if h.Degraded {
		c.Status = configv1.ConditionTrue
	}
	c.Reason, c.Message = h.Reason, h.Message
	return c, nil
}

// SetCondition adds or updates the condition of c.Type in conds, leaving every other
// condition as it is. LastTransitionTime moves only when the status changes. It reports
// whether anything changed.
func SetCondition(conds *[]configv1.ClusterOperatorStatusCondition, c configv1.ClusterOperatorStatusCondition) bool {
	for i := range *conds {
		old := &(*conds)[i]
		if old.Type != c.Type {
			continue
		}
		if old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message {
			return false
		}
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		} else {
			c.LastTransitionTime = metav1.Now()
		}
		*old = c
		return true
	}
	c.LastTransitionTime = metav1.Now()
	*conds = append(*conds, c)
	return true
}
