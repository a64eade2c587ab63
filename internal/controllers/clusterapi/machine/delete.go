package machine

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/machina-dev/machina/internal/drain"
	"github.com/machina-dev/machina/internal/events"
)

// deletionSteps are the reasons of the Deleting condition in the order the steps run. The
// stored reason says how far a deletion got, so a step that is done is not run again.
var deletionSteps = []string{
	clusterv1.MachineDeletingReason,
	clusterv1.MachineDeletingWaitingForPreDrainHookReason,
	clusterv1.MachineDeletingDrainingNodeReason,
	clusterv1.MachineDeletingWaitingForVolumeDetachReason,
	clusterv1.MachineDeletingWaitingForPreTerminateHookReason,
	clusterv1.MachineDeletingWaitingForInfrastructureDeletionReason,
	clusterv1.MachineDeletingWaitingForBootstrapDeletionReason,
	clusterv1.MachineDeletingDeletingNodeReason,
	clusterv1.MachineDeletingDeletionCompletedReason,
}

// reached reports whether the deletion already got to step (or past it).
func reached(m *clusterv1.Machine, step string) bool {
	c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineDeletingCondition)
	if c == nil || c.Status != metav1.ConditionTrue {
		return false
	}
	return slices.Index(deletionSteps, c.Reason) >= slices.Index(deletionSteps, step)
}

// condition returns the message of the Machine's condition t ("" when it has none).
func condition(m *clusterv1.Machine, t string) string {
	if c := meta.FindStatusCondition(m.Status.Conditions, t); c != nil {
		return c.Message
	}
	return ""
}

func deleting(m *clusterv1.Machine, reason, msg string) {
	setCondition(m, clusterv1.MachineDeletingCondition, metav1.ConditionTrue, reason, msg)
}

// reconcileDelete walks the deletion steps in order; a step that is not done reports why in
// the Deleting condition and returns.
func (r *Reconciler) reconcileDelete(ctx context.Context, m *clusterv1.Machine, cluster *clusterv1.Cluster) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(m, clusterv1.MachineFinalizer) {
		return ctrl.Result{}, nil
	}
	r.setPhase(m, clusterv1.MachinePhaseDeleting)
	setReady(m)
	// Step 0: the Machine whose Node runs this manager waits for the override annotation (or
	// for the manager to move).
	if held, err := r.protectsManager(ctx, m, cluster); err != nil || held {
		if held {
			r.holdForManager(m)
		}
		return ctrl.Result{}, err
	}
	if !reached(m, clusterv1.MachineDeletingReason) {
		deleting(m, clusterv1.MachineDeletingReason, "deletion started")
	}
	if m.Status.Deletion == nil {
		m.Status.Deletion = &clusterv1.MachineDeletionStatus{}
	}
	now := metav1.Now()
	// When the whole Cluster goes, its Nodes go with it: there is nothing to drain into.
	clusterGoing := cluster == nil || !cluster.DeletionTimestamp.IsZero()
	nodeName := m.Status.NodeRef.Name

	// Step 1: pre-drain hooks hold everything that follows.
	if !reached(m, clusterv1.MachineDeletingDrainingNodeReason) {
		if hooks := hookAnnotations(m, clusterv1.PreDrainDeleteHookAnnotationPrefix); len(hooks) > 0 {
			if m.Status.Deletion.WaitForPreDrainHookStartTime.IsZero() {
				m.Status.Deletion.WaitForPreDrainHookStartTime = now
				events.Eventf(r.Recorder, m, corev1.EventTypeNormal, "WaitingForPreDrainHook", "Waiting for pre-drain hooks: %s", strings.Join(hooks, ", "))
			}
			deleting(m, clusterv1.MachineDeletingWaitingForPreDrainHookReason, "waiting for pre-drain hooks: "+strings.Join(hooks, ", "))
			return ctrl.Result{}, nil
		}
	}

	// Steps 2 and 3: drain the Node, then wait for its volumes to detach.
	if nodeName != "" && !clusterGoing && !reached(m, clusterv1.MachineDeletingWaitingForPreTerminateHookReason) {
		wc, err := r.Remote.Client(ctx, m.Namespace, cluster.Name)
		if err != nil {
			deleting(m, clusterv1.MachineDeletingInternalErrorReason, "cannot reach the workload cluster: "+err.Error())
			return ctrl.Result{RequeueAfter: WaitRequeue}, nil
		}
		if !reached(m, clusterv1.MachineDeletingWaitingForVolumeDetachReason) {
			if res, done, err := r.drainStep(ctx, wc, m, cluster, nodeName, now); !done || err != nil {
				return res, err
			}
		}
		if res, done, err := r.volumeStep(ctx, wc, m, nodeName, now); !done || err != nil {
			return res, err
		}
	}

	// Step 4: pre-terminate hooks hold the infrastructure's deletion.
	if !reached(m, clusterv1.MachineDeletingWaitingForInfrastructureDeletionReason) {
		if hooks := hookAnnotations(m, clusterv1.PreTerminateDeleteHookAnnotationPrefix); len(hooks) > 0 {
			if m.Status.Deletion.WaitForPreTerminateHookStartTime.IsZero() {
				m.Status.Deletion.WaitForPreTerminateHookStartTime = now
				events.Eventf(r.Recorder, m, corev1.EventTypeNormal, "WaitingForPreTerminateHook", "Waiting for pre-terminate hooks: %s", strings.Join(hooks, ", "))
			}
			deleting(m, clusterv1.MachineDeletingWaitingForPreTerminateHookReason, "waiting for pre-terminate hooks: "+strings.Join(hooks, ", "))
			return ctrl.Result{}, nil
		}
	}

	// Step 5: delete the InfraMachine and the bootstrap config, and wait until both are gone.
	infraGone, err := r.Resolver.Delete(ctx, r.Client, m.Spec.InfrastructureRef, m.Namespace)
	if err != nil {
		deleting(m, clusterv1.MachineDeletingInternalErrorReason, err.Error())
		return ctrl.Result{}, err
	}
	bootstrapGone := true
	if ref := m.Spec.Bootstrap.ConfigRef; ref.IsDefined() {
		if bootstrapGone, err = r.Resolver.Delete(ctx, r.Client, ref, m.Namespace); err != nil {
			deleting(m, clusterv1.MachineDeletingInternalErrorReason, err.Error())
			return ctrl.Result{}, err
		}
	}
	if !infraGone {
		ref := m.Spec.InfrastructureRef
		setCondition(m, clusterv1.MachineInfrastructureReadyCondition, metav1.ConditionFalse, clusterv1.MachineInfrastructureDeletedReason,
			fmt.Sprintf("%s %s is being deleted", ref.Kind, ref.Name))
		deleting(m, clusterv1.MachineDeletingWaitingForInfrastructureDeletionReason,
			fmt.Sprintf("waiting for %s %s to be deleted", ref.Kind, ref.Name))
		return ctrl.Result{RequeueAfter: WaitRequeue}, nil
	}
	if !bootstrapGone {
		ref := m.Spec.Bootstrap.ConfigRef
		deleting(m, clusterv1.MachineDeletingWaitingForBootstrapDeletionReason,
			fmt.Sprintf("waiting for %s %s to be deleted", ref.Kind, ref.Name))
		return ctrl.Result{RequeueAfter: WaitRequeue}, nil
	}

	// Step 6: delete the Node.
	if nodeName != "" {
		if res, done, err := r.deleteNodeStep(ctx, m, cluster, nodeName); !done || err != nil {
			return res, err
		}
	}

	// Step 7: let the Machine go.
	deleting(m, clusterv1.MachineDeletingDeletionCompletedReason, "deletion completed")
	controllerutil.RemoveFinalizer(m, clusterv1.MachineFinalizer)
	events.Eventf(r.Recorder, m, corev1.EventTypeNormal, "Deleted", "Machine %s is deleted", m.Name)
	return ctrl.Result{}, nil
}

func (r *Reconciler) drainStep(ctx context.Context, wc client.Client, m *clusterv1.Machine, cluster *clusterv1.Cluster,
	nodeName string, now metav1.Time) (ctrl.Result, bool, error) {
	if _, skip := m.Annotations[clusterv1.ExcludeNodeDrainingAnnotation]; skip {
		log.FromContext(ctx).V(1).Info("drain skipped by annotation", "node", nodeName)
		return ctrl.Result{}, true, nil
	}
	if m.Status.Deletion.NodeDrainStartTime.IsZero() {
		m.Status.Deletion.NodeDrainStartTime = now
	}
	if timedOut(m.Status.Deletion.NodeDrainStartTime, m.Spec.Deletion.NodeDrainTimeoutSeconds) {
		events.Eventf(r.Recorder, m, corev1.EventTypeWarning, "DrainTimeout", "Gave up draining Node %s after %ds", nodeName, *m.Spec.Deletion.NodeDrainTimeoutSeconds)
		return ctrl.Result{}, true, nil
	}
	classify, err := r.drainClassifier(ctx, wc, m, cluster)
	if err != nil {
		msg := fmt.Sprintf("draining Node %s: %v", nodeName, err)
		if condition(m, clusterv1.MachineDeletingCondition) != msg {
			events.Eventf(r.Recorder, m, corev1.EventTypeWarning, "DrainRuleInvalid", "Draining Node %s: %v", nodeName, err)
		}
		deleting(m, clusterv1.MachineDeletingDrainingNodeReason, msg)
		return ctrl.Result{RequeueAfter: WaitRequeue}, false, nil
	}
	deleting(m, clusterv1.MachineDeletingDrainingNodeReason, "draining Node "+nodeName)
	res, err := drain.DrainWith(ctx, wc, wc, nodeName, classify)
	if err != nil {
		deleting(m, clusterv1.MachineDeletingDrainingNodeReason, fmt.Sprintf("draining Node %s: %v", nodeName, err))
		return ctrl.Result{}, false, err
	}
	if !res.Done {
		deleting(m, clusterv1.MachineDeletingDrainingNodeReason, fmt.Sprintf("draining Node %s: %s", nodeName, res.Summary()))
		if len(res.Blocked) > 0 {
			events.Eventf(r.Recorder, m, corev1.EventTypeWarning, "DrainBlocked", "Draining Node %s: %s", nodeName, res.Summary())
		}
		return ctrl.Result{RequeueAfter: WaitRequeue}, false, nil
	}
	events.Eventf(r.Recorder, m, corev1.EventTypeNormal, "SuccessfulDrainNode", "Drained Node %s", nodeName)
	return ctrl.Result{}, true, nil
}

func (r *Reconciler) volumeStep(ctx context.Context, wc client.Client, m *clusterv1.Machine, nodeName string, now metav1.Time) (ctrl.Result, bool, error) {
	if _, skip := m.Annotations[clusterv1.ExcludeWaitForNodeVolumeDetachAnnotation]; skip {
		return ctrl.Result{}, true, nil
	}
	if m.Status.Deletion.WaitForNodeVolumeDetachStartTime.IsZero() {
		m.Status.Deletion.WaitForNodeVolumeDetachStartTime = now
	}
	if timedOut(m.Status.Deletion.WaitForNodeVolumeDetachStartTime, m.Spec.Deletion.NodeVolumeDetachTimeoutSeconds) {
		events.Eventf(r.Recorder, m, corev1.EventTypeWarning, "VolumeDetachTimeout", "Gave up waiting for volumes to detach from Node %s", nodeName)
		return ctrl.Result{}, true, nil
	}
	var node corev1.Node
	if err := wc.Get(ctx, client.ObjectKey{Name: nodeName}, &node); apierrors.IsNotFound(err) {
		return ctrl.Result{}, true, nil
	} else if err != nil {
		deleting(m, clusterv1.MachineDeletingWaitingForVolumeDetachReason, fmt.Sprintf("reading Node %s: %v", nodeName, err))
		return ctrl.Result{RequeueAfter: WaitRequeue}, false, nil
	}
	if n := len(node.Status.VolumesAttached); n > 0 {
		names := make([]string, 0, n)
		for _, v := range node.Status.VolumesAttached {
			names = append(names, string(v.Name))
		}
		sort.Strings(names)
		deleting(m, clusterv1.MachineDeletingWaitingForVolumeDetachReason,
			fmt.Sprintf("waiting for %d volume(s) to detach from Node %s: %s", n, nodeName, strings.Join(names, ", ")))
		return ctrl.Result{RequeueAfter: WaitRequeue}, false, nil
	}
	return ctrl.Result{}, true, nil
}

func (r *Reconciler) deleteNodeStep(ctx context.Context, m *clusterv1.Machine, cluster *clusterv1.Cluster, nodeName string) (ctrl.Result, bool, error) {
	if cluster == nil {
		return ctrl.Result{}, true, nil // no Cluster, no way to reach its Nodes
	}
	// The timeout counts from when this step was first reported.
	var since metav1.Time
	if c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineDeletingCondition); c != nil &&
		c.Reason == clusterv1.MachineDeletingDeletingNodeReason {
		since = c.LastTransitionTime
	}
	giveUp := func(err error) (ctrl.Result, bool, error) {
		if !since.IsZero() && timedOut(since, m.Spec.Deletion.NodeDeletionTimeoutSeconds) {
			events.Eventf(r.Recorder, m, corev1.EventTypeWarning, "NodeDeletionTimeout", "Gave up deleting Node %s: %v", nodeName, err)
			return ctrl.Result{}, true, nil
		}
		deleting(m, clusterv1.MachineDeletingDeletingNodeReason, fmt.Sprintf("deleting Node %s: %v", nodeName, err))
		return ctrl.Result{RequeueAfter: WaitRequeue}, false, nil
	}
	wc, err := r.Remote.Client(ctx, m.Namespace, cluster.Name)
	if err != nil {
		return giveUp(err)
	}
	deleting(m, clusterv1.MachineDeletingDeletingNodeReason, "deleting Node "+nodeName)
	err = wc.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}})
	if err != nil && !apierrors.IsNotFound(err) {
		return giveUp(err)
	}
	if err == nil {
		events.Eventf(r.Recorder, m, corev1.EventTypeNormal, "SuccessfulDeleteNode", "Deleted Node %s", nodeName)
	}
	return ctrl.Result{}, true, nil
}

// timedOut reports whether a step started at start has run longer than its timeout in
// seconds (nil or zero: no timeout).
func timedOut(start metav1.Time, seconds *int32) bool {
	if seconds == nil || *seconds <= 0 || start.IsZero() {
		return false
	}
	return time.Since(start.Time) > time.Duration(*seconds)*time.Second
}

// hookAnnotations lists the Machine's annotations with the hook prefix, sorted.
func hookAnnotations(m *clusterv1.Machine, prefix string) []string {
	var out []string
	for k := range m.Annotations {
		if strings.HasPrefix(k, prefix+"/") {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
