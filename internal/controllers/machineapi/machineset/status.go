package machineset

import (
	"context"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// updateStatus computes the MachineSet's status from its Machines and their Nodes. It
// returns when to look again: when a ready Machine will have been ready for minReadySeconds.
func (r *Reconciler) updateStatus(ctx context.Context, ms *machinev1beta1.MachineSet, machines []*machinev1beta1.Machine) (time.Duration, error) {
	minReady := time.Duration(ms.Spec.MinReadySeconds) * time.Second
	templateLabels := labels.Set(ms.Spec.Template.ObjectMeta.Labels)
	var replicas, labelled, ready, available int32
	var next time.Duration
	for _, m := range machines {
		if !m.DeletionTimestamp.IsZero() {
			continue
		}
		replicas++
		if labels.SelectorFromSet(templateLabels).Matches(labels.Set(m.Labels)) {
			labelled++
		}
		since, ok, err := r.readySince(ctx, m)
		if err != nil {
			return 0, err
		}
		if !ok {
			continue
		}
		ready++
		if wait := minReady - time.Since(since); wait <= 0 {
			available++
		} else if next == 0 || wait < next {
			next = wait
		}
	}
	sel, _ := metav1.LabelSelectorAsSelector(&ms.Spec.Selector)
	ms.Status.Replicas = replicas
	ms.Status.FullyLabeledReplicas = labelled
	ms.Status.ReadyReplicas = ready
	ms.Status.AvailableReplicas = available
	ms.Status.ObservedGeneration = ms.Generation
	ms.Status.LabelSelector = sel.String()
	if next > 0 {
		return next + 100*time.Millisecond, nil
	}
	return 0, nil
}

// nodeNameIndex indexes Nodes by name, so that a pass reads each Node of its Machines from
// the cache without copying it (a Get copies the whole Node: at 3000 Machines in one set those
// copies were a third of the manager's CPU late in a scale-up).
const nodeNameIndex = "machineset.nodeName"

// readySince reports whether the Machine's Node is Ready, and since when.
func (r *Reconciler) readySince(ctx context.Context, m *machinev1beta1.Machine) (time.Time, bool, error) {
	if m.Status.NodeRef == nil {
		return time.Time{}, false, nil
	}
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes, client.MatchingFields{nodeNameIndex: m.Status.NodeRef.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return time.Time{}, false, err
	}
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.LastTransitionTime.Time, c.Status == corev1.ConditionTrue, nil
			}
		}
	}
	return time.Time{}, false, nil
}

// minorStatusChange reports whether only the counts moved (the same observed generation,
// selector, error, authority and conditions) and they have not settled yet: such a write can
// wait for the throttle; settled counts (every wanted replica ready and available) go out at
// once, as does anything of a MachineSet being deleted.
func minorStatusChange(before, after *machinev1beta1.MachineSet) bool {
	b, a := before.Status, after.Status
	b.Replicas, b.FullyLabeledReplicas, b.ReadyReplicas, b.AvailableReplicas = a.Replicas, a.FullyLabeledReplicas, a.ReadyReplicas, a.AvailableReplicas
	if !equality.Semantic.DeepEqual(b, a) || !after.DeletionTimestamp.IsZero() {
		return false
	}
	settled := after.Spec.Replicas != nil && a.Replicas == *after.Spec.Replicas && a.ReadyReplicas == a.Replicas && a.AvailableReplicas == a.Replicas
	return !settled
}
