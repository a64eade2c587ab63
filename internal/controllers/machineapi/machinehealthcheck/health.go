package machinehealthcheck

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
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

// deleting reports whether the target's Machine is being deleted: it is not healthy, and
// not remediated again.
func (t *target) deleting() bool { return !t.machine.DeletionTimestamp.IsZero() }

// targets lists the selected Machines with their Nodes. Machines being deleted are listed
// too: assess counts them as not healthy until they are gone, so a remediation in progress
// still counts against maxUnhealthy.
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

// maxUnhealthy scales spec.maxUnhealthy to the number of targets: a number, given as an
// integer or as a string without '%' (the CRD's pattern allows "3"), is a count; a
// percentage rounds down. Unset means 100%; a negative count allows none.
func maxUnhealthy(v *intstr.IntOrString, targets int) (int, error) {
	if v == nil {
		return targets, nil
	}
	if v.Type == intstr.Int {
		return max(0, v.IntValue()), nil
	}
	s, percent := strings.CutSuffix(v.StrVal, "%")
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("invalid value %q: want a count such as 3 or a percentage such as 40%%", v.StrVal)
	}
	if percent {
		n = n * targets / 100
	}
	return max(0, n), nil
}
