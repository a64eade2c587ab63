// Package drain empties a Node before its machine goes away: it cordons the Node and evicts
// its pods through the Eviction API, so PodDisruptionBudgets are honoured. It is a
// level-triggered step: each call does what can be done now and reports whether the Node is
// empty, so a controller calls it again on its next reconcile until it is.
package drain

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MirrorPodAnnotation marks static pods mirrored by a kubelet; they cannot be evicted.
const MirrorPodAnnotation = "kubernetes.io/config.mirror"

// UnreachableSkipWait is how long a pod on an unreachable Node may have been terminating
// before the drain stops waiting for it: its kubelet is gone and will never finish it.
const UnreachableSkipWait = time.Second

// Result says where a drain stands.
type Result struct {
	// Done is true when no pod that must leave is left on the Node (or the Node is gone).
	Done bool
	// Unreachable is true when the Node's Ready condition is not True; pods are then
	// evicted with a one-second grace period and not waited for.
	Unreachable bool
	// Evicted counts evictions issued by this call.
	Evicted int
	// Waiting lists pods that are still terminating.
	Waiting []string
	// Blocked lists pods whose eviction was refused, with the reason (usually a
	// PodDisruptionBudget).
	Blocked []string
	// Completing lists WaitCompleted pods of the current order group that have not
	// finished yet; they are never evicted.
	Completing []string
	// Later lists pods of higher order groups, drained (or waited for) once the current
	// group has left the Node.
	Later []string
}

// Summary is a one-line description for conditions and events: counts and the first names
// of each kind of pod the drain is waiting for.
func (r Result) Summary() string {
	if r.Done {
		return "the Node is drained"
	}
	var parts []string
	if len(r.Blocked) > 0 {
		parts = append(parts, fmt.Sprintf("%d pod(s) cannot be evicted yet: %s", len(r.Blocked), strings.Join(first(r.Blocked, 3), "; ")))
	}
	if len(r.Waiting) > 0 {
		parts = append(parts, fmt.Sprintf("waiting for %d pod(s) to terminate: %s", len(r.Waiting), strings.Join(first(r.Waiting, 3), ", ")))
	}
	if len(r.Completing) > 0 {
		parts = append(parts, fmt.Sprintf("waiting for %d pod(s) to complete: %s", len(r.Completing), strings.Join(first(r.Completing, 3), ", ")))
	}
	if len(r.Later) > 0 {
		parts = append(parts, fmt.Sprintf("%d pod(s) of a later drain order: %s", len(r.Later), strings.Join(first(r.Later, 3), ", ")))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("evicted %d pod(s)", r.Evicted)
	}
	return strings.Join(parts, "; ")
}

func first(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(append([]string{}, s[:n]...), fmt.Sprintf("and %d more", len(s)-n))
}

// Drain cordons the Node and evicts its pods, skipping DaemonSet-managed and mirror pods.
// reader lists pods by node (it must not be a cache without a spec.nodeName index; pass a
// manager's APIReader); c writes the cordon and the evictions.
func Drain(ctx context.Context, c client.Client, reader client.Reader, nodeName string) (Result, error) {
	return DrainWith(ctx, c, reader, nodeName, nil)
}

// DrainWith is Drain with a Classifier deciding each pod's behaviour and order (nil: every
// pod is evicted, order 0). Pods are drained in groups by increasing order: a group is
// evicted (or, for WaitCompleted pods, waited for) only once every pod of the lower groups
// has left the Node.
func DrainWith(ctx context.Context, c client.Client, reader client.Reader, nodeName string, classify Classifier) (Result, error) {
	var node corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: nodeName}, &node); apierrors.IsNotFound(err) {
		return Result{Done: true}, nil
	} else if err != nil {
		return Result{}, err
	}
	res := Result{Unreachable: !util.IsNodeReady(&node)}
	if !node.Spec.Unschedulable {
		patch := client.MergeFrom(node.DeepCopy())
		node.Spec.Unschedulable = true
		if err := c.Patch(ctx, &node, patch); err != nil && !apierrors.IsNotFound(err) {
			return res, fmt.Errorf("cordoning Node %s: %w", nodeName, err)
		}
	}
	var pods corev1.PodList
	if err := reader.List(ctx, &pods, client.MatchingFieldsSelector{
		Selector: fields.OneTermEqualSelector("spec.nodeName", nodeName)}); err != nil {
		return res, fmt.Errorf("listing pods on Node %s: %w", nodeName, err)
	}
	planned, err := plan(pods.Items, res.Unreachable, classify)
	if err != nil {
		return res, err
	}
	for _, pod := range group(planned, &res) {
		if err := evict(ctx, c, pod, res.Unreachable, &res); err != nil {
			return res, err
		}
	}
	for _, l := range [][]string{res.Waiting, res.Blocked, res.Completing, res.Later} {
		sort.Strings(l)
	}
	res.Done = len(res.Waiting) == 0 && len(res.Blocked) == 0 && len(res.Completing) == 0 && len(res.Later) == 0
	return res, nil
}

// evict asks the Eviction API to remove the pod and records the outcome in res.
func evict(ctx context.Context, c client.Client, pod *corev1.Pod, unreachable bool, res *Result) error {
	name := pod.Namespace + "/" + pod.Name
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}}
	if unreachable {
		ev.DeleteOptions = &metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)}
	}
	err := c.SubResource("eviction").Create(ctx, pod, ev)
	switch {
	case err == nil:
		res.Evicted++
		res.Waiting = append(res.Waiting, name)
	case apierrors.IsNotFound(err):
	case apierrors.IsTooManyRequests(err):
		res.Blocked = append(res.Blocked, name+": "+err.Error())
	default:
		return fmt.Errorf("evicting pod %s: %w", name, err)
	}
	return nil
}

// skip reports pods a drain leaves alone: mirror pods, DaemonSet pods (their controller
// would recreate them on the cordoned Node anyway), and pods that have finished.
func skip(pod *corev1.Pod) bool {
	if _, mirror := pod.Annotations[MirrorPodAnnotation]; mirror {
		return true
	}
	if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == "DaemonSet" {
		return true
	}
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}
