// Package machinehealthcheck is the Cluster API (cluster.x-k8s.io/v1beta2)
// MachineHealthCheck controller. For the Machines of one Cluster that a check selects it
// decides which are unhealthy — a Node condition or a Machine condition held past its
// timeout (checks.unhealthyNodeConditions, checks.unhealthyMachineConditions), no Node
// within checks.nodeStartupTimeoutSeconds, a Node that was deleted, a terminal failure, or
// the cluster.x-k8s.io/remediate-machine annotation — and reports it in each Machine's
// HealthCheckSucceeded condition. Unless remediation.triggerIf short-circuits it
// (RemediationAllowed=False), it asks for remediation: OwnerRemediated=False for the
// Machine's owner (a MachineSet deletes and replaces it), or an external remediation request
// cloned from remediation.templateRef. Machines with cluster.x-k8s.io/skip-remediation or
// cluster.x-k8s.io/paused are not targets: neither checked, counted nor remediated, as in the
// upstream core. It requeues itself at the next timeout instead of polling.
//
// The same Reconciler in Mirrors mode (mirrors.go, run by the sync group) covers what that
// leaves out in a cluster migrating between the APIs: the paused Cluster API mirrors of
// Machines the Machine API owns, under a check the Cluster API owns.
package machinehealthcheck

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/remote"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/patch"
)

// Node annotations, set by the Machine controller, naming a Node's Machine.
const (
	machineAnnotation          = "cluster.x-k8s.io/machine"
	clusterNamespaceAnnotation = "cluster.x-k8s.io/cluster-namespace"
)

// RemoteRetry is how soon a check whose workload cluster could not be read tries again.
const RemoteRetry = 5 * time.Second

// Reconciler reconciles cluster.x-k8s.io MachineHealthChecks.
type Reconciler struct {
	Client   client.Client
	Remote   *remote.Clients // the workload clusters' Nodes; nil: the Nodes of Client's cluster
	Recorder record.EventRecorder
	// Mirrors makes this the sync's health check of mirrors (mirrors.go) instead of the
	// Cluster API MachineHealthCheck controller.
	Mirrors bool
}

// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinehealthchecks;machinehealthchecks/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;machines/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes;secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// SetupWithManager registers the controller with watches on Machines, Clusters and (for a
// self-hosted workload cluster, like the lab) Nodes.
// In Mirrors mode it is the controller sync-mirror-machinehealthcheck, and a Node maps to
// every check (allChecks).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	name, nodeToChecks := "clusterapi-machinehealthcheck", r.nodeToChecks
	if r.Mirrors {
		name, nodeToChecks = "sync-mirror-machinehealthcheck", r.allChecks
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		For(&clusterv1.MachineHealthCheck{}).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(r.machineToChecks)).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToChecks), builder.WithPredicates(gate.ClusterChanged)).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(nodeToChecks), builder.WithPredicates(gate.NodeChanged)).
		Complete(r)
}

func (r *Reconciler) machineToChecks(ctx context.Context, o client.Object) []reconcile.Request {
	m, ok := o.(*clusterv1.Machine)
	if !ok {
		return nil
	}
	var list clusterv1.MachineHealthCheckList
	if err := r.Client.List(ctx, &list, client.InNamespace(m.Namespace)); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if selects(&list.Items[i], m) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

func (r *Reconciler) clusterToChecks(ctx context.Context, o client.Object) []reconcile.Request {
	var list clusterv1.MachineHealthCheckList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if list.Items[i].Spec.ClusterName == o.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

func (r *Reconciler) nodeToChecks(ctx context.Context, o client.Object) []reconcile.Request {
	a := o.GetAnnotations()
	if a[machineAnnotation] == "" || a[clusterNamespaceAnnotation] == "" {
		return nil
	}
	var m clusterv1.Machine
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: a[clusterNamespaceAnnotation], Name: a[machineAnnotation]}, &m); err != nil {
		return nil
	}
	return r.machineToChecks(ctx, &m)
}

// selects reports whether the check covers the Machine: same Cluster, selector matches.
func selects(mhc *clusterv1.MachineHealthCheck, m *clusterv1.Machine) bool {
	if m.Spec.ClusterName != mhc.Spec.ClusterName {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(&mhc.Spec.Selector)
	return err == nil && !sel.Empty() && sel.Matches(labels.Set(m.Labels))
}

// Reconcile evaluates the targets of one MachineHealthCheck, reports on each and asks for
// the remediation of the unhealthy ones when allowed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	if r.Mirrors {
		return r.reconcileMirrors(ctx, req)
	}
	mhc := &clusterv1.MachineHealthCheck{}
	if err := r.Client.Get(ctx, req.NamespacedName, mhc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	helper := patch.NewHelper(mhc, r.Client)
	defer func() {
		mhc.Status.ObservedGeneration = mhc.Generation
		helper.Finish(ctx, mhc, &res, &retErr)
	}()

	cluster, err := gate.Cluster(ctx, r.Client, mhc.Namespace, mhc.Spec.ClusterName)
	if err != nil {
		return ctrl.Result{}, err
	}
	if d, _ := gate.ClusterAPI(mhc, cluster, &mhc.Status.Conditions); d.Paused {
		log.FromContext(ctx).V(1).Info("not reconciling", "reason", d.Message)
		return ctrl.Result{}, nil
	}
	if !mhc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if cluster == nil {
		setCondition(mhc, metav1.ConditionFalse, "ClusterNotFound", fmt.Sprintf("Cluster %s does not exist", mhc.Spec.ClusterName))
		return ctrl.Result{}, nil
	}
	if linkCluster(mhc, cluster) {
		return ctrl.Result{}, nil
	}

	targets, err := r.targets(ctx, mhc, cluster)
	if err != nil {
		setCondition(mhc, metav1.ConditionUnknown, "InspectionFailed", err.Error())
		log.FromContext(ctx).Info("cannot inspect the workload cluster", "error", err.Error())
		return ctrl.Result{RequeueAfter: RemoteRetry}, nil
	}
	healthy, next := assess(mhc, cluster, targets, time.Now())
	names := make([]string, 0, len(targets))
	for _, t := range targets {
		names = append(names, t.machine.Name)
	}
	sort.Strings(names)
	expected := len(targets)
	notHealthy := expected - healthy
	allowed, maxUnhealthy, err := triggerAllows(mhc, expected, notHealthy)
	if err != nil {
		setCondition(mhc, metav1.ConditionFalse, "InvalidTriggerIf", err.Error())
		return ctrl.Result{}, nil
	}
	mhc.Status.ExpectedMachines = ptr.To(int32(expected))
	mhc.Status.CurrentHealthy = ptr.To(int32(healthy))
	mhc.Status.RemediationsAllowed = ptr.To(int32(max(0, maxUnhealthy-notHealthy)))
	mhc.Status.Targets = names
	if allowed {
		setCondition(mhc, metav1.ConditionTrue, clusterv1.MachineHealthCheckRemediationAllowedReason, "")
	} else {
		msg := fmt.Sprintf("Remediation is not allowed: %d of %d Machines are not healthy, outside what remediation.triggerIf allows (%s)",
			notHealthy, expected, triggerString(mhc))
		if setCondition(mhc, metav1.ConditionFalse, clusterv1.MachineHealthCheckTooManyUnhealthyReason, msg) {
			events.Eventf(r.Recorder, mhc, corev1.EventTypeWarning, clusterv1.MachineHealthCheckTooManyUnhealthyReason, "%s", msg)
		}
	}

	return r.reportAll(ctx, mhc, targets, allowed, next)
}

// reportAll reports on each target (report) and says when to look again: soon after a
// conflict, else at the next timeout (next).
func (r *Reconciler) reportAll(ctx context.Context, mhc *clusterv1.MachineHealthCheck, targets []*target, allowed bool, next time.Duration) (ctrl.Result, error) {
	var errs []error
	conflict := false
	for _, t := range targets {
		err := r.report(ctx, mhc, t, allowed)
		switch {
		case apierrors.IsConflict(err):
			conflict = true
		case err != nil:
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return ctrl.Result{}, kerrors.NewAggregate(errs)
	}
	if conflict {
		// Another controller wrote a Machine meanwhile: look again on fresh data.
		return ctrl.Result{RequeueAfter: 200 * time.Millisecond}, nil
	}
	if next > 0 {
		next += 100 * time.Millisecond
	}
	return ctrl.Result{RequeueAfter: next}, nil
}

// assess evaluates every target and counts the healthy ones as upstream does: a target is
// healthy only with a Node and no failing check, not even one whose timeout is still running,
// so every other target counts against triggerIf and an outage stops remediation before its
// timeouts make Machines eligible for it. next is when a target may turn unhealthy.
func assess(mhc *clusterv1.MachineHealthCheck, cluster *clusterv1.Cluster, targets []*target, now time.Time) (healthy int, next time.Duration) {
	for _, t := range targets {
		t.evaluate(mhc, cluster, now)
		if t.healthy() {
			healthy++
		}
		if t.nextCheck > 0 && (next == 0 || t.nextCheck < next) {
			next = t.nextCheck
		}
	}
	return healthy, next
}

// linkCluster sets the cluster-name label and an owner reference to the Cluster; it
// reports whether anything changed (the patch brings the check back).
func linkCluster(mhc *clusterv1.MachineHealthCheck, cluster *clusterv1.Cluster) bool {
	changed := false
	if mhc.Labels[clusterv1.ClusterNameLabel] != cluster.Name {
		if mhc.Labels == nil {
			mhc.Labels = map[string]string{}
		}
		mhc.Labels[clusterv1.ClusterNameLabel] = cluster.Name
		changed = true
	}
	for _, o := range mhc.OwnerReferences {
		if o.UID == cluster.UID {
			return changed
		}
	}
	mhc.OwnerReferences = append(mhc.OwnerReferences, metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(),
		Kind: "Cluster", Name: cluster.Name, UID: cluster.UID})
	return true
}

func setCondition(mhc *clusterv1.MachineHealthCheck, s metav1.ConditionStatus, reason, msg string) bool {
	return meta.SetStatusCondition(&mhc.Status.Conditions, metav1.Condition{Type: clusterv1.MachineHealthCheckRemediationAllowedCondition,
		Status: s, Reason: reason, Message: msg, ObservedGeneration: mhc.Generation})
}
