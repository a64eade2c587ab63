// Package machinehealthcheck is the Machine API MachineHealthCheck controller: it watches the
// Machines a MachineHealthCheck selects and their Nodes, decides which are unhealthy (a Node
// condition held past its timeout, no Node after nodeStartupTimeout, a Node that vanished, a
// Failed Machine) and remediates them — deleting Machines that have an owner to replace them,
// or creating an external remediation object from remediationTemplate — unless more are
// unhealthy than maxUnhealthy allows. It requeues at the next timeout instead of polling.
package machinehealthcheck

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
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
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/patch"
)

// Condition reasons.
const (
	TooManyUnhealthyReason = "TooManyUnhealthy"
	RemediationAllowed     = "RemediationAllowed"
	// RemediationPausedReason: the check has the cluster.x-k8s.io/paused annotation.
	RemediationPausedReason = "RemediationPaused"
	// RemediationRestrictedEvent is the reason of the Warning event sent when the check
	// turns TooManyUnhealthy (the Machine API's own health check uses the same).
	RemediationRestrictedEvent = "RemediationRestricted"
)

// Reconciler reconciles machine.openshift.io MachineHealthChecks.
type Reconciler struct {
	Client   client.Client
	Recorder record.EventRecorder
}

// +kubebuilder:rbac:groups=machine.openshift.io,resources=machinehealthchecks;machinehealthchecks/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=machine.openshift.io,resources=machines,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// SetupWithManager registers the controller with watches on Machines and Nodes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	// Nodes of Machines that another API owns carry no machine.openshift.io/machine
	// annotation (NodeLink leaves them alone), so Nodes are also matched by status.nodeRef.
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &machinev1beta1.Machine{}, nodeRefIndex, func(o client.Object) []string {
		if m := o.(*machinev1beta1.Machine); m.Status.NodeRef != nil && m.Status.NodeRef.Name != "" {
			return []string{m.Status.NodeRef.Name}
		}
		return nil
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("machineapi-machinehealthcheck").
		For(&machinev1beta1.MachineHealthCheck{}).
		Watches(&machinev1beta1.Machine{}, handler.EnqueueRequestsFromMapFunc(r.machineToChecks)).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.nodeToChecks), builder.WithPredicates(gate.NodeChanged)).
		Complete(r)
}

func (r *Reconciler) machineToChecks(ctx context.Context, o client.Object) []reconcile.Request {
	var list machinev1beta1.MachineHealthCheckList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if sel, err := metav1.LabelSelectorAsSelector(&list.Items[i].Spec.Selector); err == nil && sel.Matches(labels.Set(o.GetLabels())) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

// nodeRefIndex indexes Machine API Machines by the name of their Node.
const nodeRefIndex = "machinehealthcheck.status.nodeRef.name"

func (r *Reconciler) nodeToChecks(ctx context.Context, o client.Object) []reconcile.Request {
	if ns, name, ok := cut(o.GetAnnotations()["machine.openshift.io/machine"]); ok {
		var m machinev1beta1.Machine
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &m); err == nil {
			return r.machineToChecks(ctx, &m)
		}
	}
	var list machinev1beta1.MachineList
	if err := r.Client.List(ctx, &list, client.MatchingFields{nodeRefIndex: o.GetName()}); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		reqs = append(reqs, r.machineToChecks(ctx, &list.Items[i])...)
	}
	return reqs
}

// Reconcile evaluates the targets of one MachineHealthCheck and remediates.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	mhc := &machinev1beta1.MachineHealthCheck{}
	if err := r.Client.Get(ctx, req.NamespacedName, mhc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	helper := patch.NewHelper(mhc, r.Client)
	defer helper.Finish(ctx, mhc, &res, &retErr)
	// A MachineHealthCheck without the status annotation counts as MachineAPI-authoritative.
	if d, _, err := gate.MachineAPI(mhc); err != nil || d.Paused {
		return ctrl.Result{}, err
	}
	if !mhc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}

	targets, err := r.targets(ctx, mhc)
	if err != nil {
		return ctrl.Result{}, err
	}
	v, err := assess(mhc, targets, time.Now())
	if err != nil {
		setCond(mhc, corev1.ConditionFalse, "InvalidMaxUnhealthy", "spec.maxUnhealthy: "+err.Error())
		return ctrl.Result{}, nil
	}
	v.writeStatus(mhc)
	switch {
	case gate.HasPausedAnnotation(mhc):
		r.reportCond(mhc, corev1.EventTypeNormal, RemediationPausedReason, RemediationPausedReason,
			"Remediation is paused: the MachineHealthCheck has the "+clusterv1.PausedAnnotation+" annotation")
		return ctrl.Result{}, nil
	case !v.allowed:
		// Nothing is remediated; requests of Machines that recovered still go.
		r.reportCond(mhc, corev1.EventTypeWarning, TooManyUnhealthyReason, RemediationRestrictedEvent, v.shortCircuitMessage(mhc))
		if err := r.forgetRemediations(ctx, mhc, targets); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: v.next}, nil
	}
	setCond(mhc, corev1.ConditionTrue, "", "")
	var errs []error
	for _, t := range v.unhealthy {
		if err := r.remediate(ctx, mhc, *t); err != nil {
			errs = append(errs, err)
		}
	}
	if err := r.forgetRemediations(ctx, mhc, targets); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return ctrl.Result{}, kerrors.NewAggregate(errs)
	}
	return ctrl.Result{RequeueAfter: v.next}, nil
}

// verdict is what one pass concluded about a check's targets.
type verdict struct {
	expected, healthy int
	// deleting are the targets being deleted: not healthy, and left alone.
	deleting int
	// unhealthy failed a check past its timeout: they are what remediation acts on.
	unhealthy []*target
	// maxUnhealthy is spec.maxUnhealthy scaled to the targets.
	maxUnhealthy int
	// allowed: the targets that are not healthy — unhealthy, or failing a check whose timeout
	// has not passed yet, or still without a Node — are within maxUnhealthy.
	allowed bool
	// next is when a target may turn unhealthy if nothing changes (0: no such target).
	next time.Duration
}

// assess evaluates every target and counts them the way upstream health checks do: a target
// is healthy only when it has a Node and fails no check, not even one whose timeout is still
// running, so an outage that takes Nodes down one after another stops remediation before
// the timeouts make the Machines eligible for it. A Machine being deleted (remediated a pass
// before, or scaled down) is not healthy until it is gone, so remediations cannot cascade
// past maxUnhealthy while earlier ones are still under way.
func assess(mhc *machinev1beta1.MachineHealthCheck, targets []target, now time.Time) (verdict, error) {
	v := verdict{expected: len(targets)}
	for i := range targets {
		t := &targets[i]
		if t.deleting() {
			v.deleting++
			continue
		}
		t.evaluate(mhc, now)
		switch {
		case t.unhealthy:
			v.unhealthy = append(v.unhealthy, t)
		case t.nextCheck > 0:
			if v.next == 0 || t.nextCheck < v.next {
				v.next = t.nextCheck
			}
		case t.node != nil:
			v.healthy++
		}
	}
	n, err := maxUnhealthy(mhc.Spec.MaxUnhealthy, v.expected)
	if err != nil {
		return v, err
	}
	v.maxUnhealthy = n
	v.allowed = v.expected-v.healthy <= v.maxUnhealthy
	return v, nil
}

func (v *verdict) writeStatus(mhc *machinev1beta1.MachineHealthCheck) {
	mhc.Status.ExpectedMachines = ptr.To(v.expected)
	mhc.Status.CurrentHealthy = ptr.To(v.healthy)
	mhc.Status.RemediationsAllowed = int32(max(0, v.maxUnhealthy-(v.expected-v.healthy)))
}

// shortCircuitMessage says why nothing is remediated and which Machines are past their
// timeout (and would be remediated once enough of the others recover).
func (v *verdict) shortCircuitMessage(mhc *machinev1beta1.MachineHealthCheck) string {
	msg := fmt.Sprintf("Remediation is not allowed: %d of %d Machines are not healthy, more than spec.maxUnhealthy %s allows",
		v.expected-v.healthy, v.expected, maxUnhealthyString(mhc))
	if len(v.unhealthy) > 0 {
		names := make([]string, len(v.unhealthy))
		for i, t := range v.unhealthy {
			names[i] = t.machine.Name
		}
		sort.Strings(names)
		msg += "; unhealthy and waiting for remediation: " + strings.Join(names, ", ")
	}
	if v.deleting > 0 {
		msg += fmt.Sprintf("; %d being deleted", v.deleting)
	}
	return msg
}

// reportCond sets RemediationAllowed=False with the reason, and sends an event (of its own
// reason) when that changed the condition.
func (r *Reconciler) reportCond(mhc *machinev1beta1.MachineHealthCheck, typ, reason, eventReason, msg string) {
	if setCond(mhc, corev1.ConditionFalse, reason, msg) {
		events.Eventf(r.Recorder, mhc, typ, eventReason, "%s", msg)
	}
}

func setCond(mhc *machinev1beta1.MachineHealthCheck, s corev1.ConditionStatus, reason, msg string) bool {
	return mapicond.Set(&mhc.Status.Conditions, machinev1beta1.Condition{
		Type: machinev1beta1.RemediationAllowedCondition, Status: s, Reason: reason, Message: msg})
}

func maxUnhealthyString(mhc *machinev1beta1.MachineHealthCheck) string {
	if mhc.Spec.MaxUnhealthy == nil {
		return "100%"
	}
	return mhc.Spec.MaxUnhealthy.String()
}
