package machinehealthcheck

import (
	"context"
	"fmt"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultNodeStartupTimeout applies when spec.nodeStartupTimeout is unset.
const DefaultNodeStartupTimeout = 10 * time.Minute

// target is one Machine a MachineHealthCheck watches over, with its Node.
type target struct {
	machine *machinev1beta1.Machine
	node    *corev1.Node // nil when the Machine has none, or it is gone
	// nodeGone is true when the Machine names a Node that no longer exists.
	nodeGone bool

	unhealthy bool
	reason    string
	// nextCheck is when the target may turn unhealthy if nothing changes.
	nextCheck time.Duration
}

// targets lists the selected Machines that are not being deleted, with their Nodes.
func (r *Reconciler) targets(ctx context.Context, mhc *machinev1beta1.MachineHealthCheck) ([]target, error) {
	sel, err := metav1.LabelSelectorAsSelector(&mhc.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("spec.selector: %w", err)
	}
	var list machinev1beta1.MachineList
	if err := r.Client.List(ctx, &list, client.InNamespace(mhc.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, err
	}
	var out []target
	for i := range list.Items {
		m := &list.Items[i]
		if !m.DeletionTimestamp.IsZero() {
			continue
		}
		t := target{machine: m}
		if m.Status.NodeRef != nil {
			var n corev1.Node
			err := r.Client.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, &n)
			switch {
			case apierrors.IsNotFound(err):
				t.nodeGone = true
			case err != nil:
				return nil, err
			default:
				t.node = &n
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// evaluate decides whether the target is unhealthy now, or when it may become so.
func (t *target) evaluate(mhc *machinev1beta1.MachineHealthCheck, now time.Time) {
	m := t.machine
	switch {
	case ptr.Deref(m.Status.Phase, "") == machinev1beta1.PhaseFailed:
		t.unhealthy, t.reason = true, "the Machine is Failed"
		return
	case t.nodeGone:
		t.unhealthy, t.reason = true, fmt.Sprintf("its Node %s is gone", m.Status.NodeRef.Name)
		return
	case t.node == nil:
		timeout := DefaultNodeStartupTimeout
		if mhc.Spec.NodeStartupTimeout != nil {
			timeout = mhc.Spec.NodeStartupTimeout.Duration
		}
		if timeout == 0 {
			return // startup checks disabled
		}
		// Counted from the Machine's last change of phase (status.lastUpdated), as the
		// Machine API's own health check does, so a Machine that only just got its
		// instance after a long wait for capacity is not replaced at once.
		start := m.CreationTimestamp.Time
		if m.Status.LastUpdated != nil && m.Status.LastUpdated.After(start) {
			start = m.Status.LastUpdated.Time
		}
		if left := start.Add(timeout).Sub(now); left > 0 {
			t.nextCheck = left
			return
		}
		t.unhealthy, t.reason = true, fmt.Sprintf("no Node joined within nodeStartupTimeout %s", timeout)
		return
	}
	var reasons []string
	for _, uc := range mhc.Spec.UnhealthyConditions {
		for _, c := range t.node.Status.Conditions {
			if c.Type != uc.Type || c.Status != uc.Status {
				continue
			}
			left := c.LastTransitionTime.Add(uc.Timeout.Duration).Sub(now)
			if left <= 0 {
				reasons = append(reasons, fmt.Sprintf("Node condition %s=%s for more than %s", c.Type, c.Status, uc.Timeout.Duration))
			} else if t.nextCheck == 0 || left < t.nextCheck {
				t.nextCheck = left
			}
		}
	}
	if len(reasons) > 0 {
		t.unhealthy, t.reason = true, strings.Join(reasons, "; ")
	}
}
