package machineset

import (
	"context"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// readySince reports whether the Machine's Node is Ready, and since when.
func (r *Reconciler) readySince(ctx context.Context, m *machinev1beta1.Machine) (time.Time, bool, error) {
	if m.Status.NodeRef == nil {
		return time.Time{}, false, nil
	}
	var node corev1.Node
	if err := r.Client.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, &node); err != nil {
		if apierrors.IsNotFound(err) {
			return time.Time{}, false, nil
		}
		return time.Time{}, false, err
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.LastTransitionTime.Time, c.Status == corev1.ConditionTrue, nil
		}
	}
	return time.Time{}, false, nil
}
