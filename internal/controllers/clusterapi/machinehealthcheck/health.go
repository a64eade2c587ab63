package machinehealthcheck

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/gate"
)

// target is one Machine a check watches over, with its Node.
type target struct {
	machine *clusterv1.Machine
	node    *corev1.Node // nil when the Machine has none yet, or it is gone
	// nodeGone is true when the Machine names a Node that no longer exists.
	nodeGone bool

	unhealthy bool
	reason    string // a HealthCheckSucceeded reason
	message   string
	// nextCheck is when the target may turn unhealthy if nothing changes (0: never).
	nextCheck time.Duration
}

// optedOut reports whether the Machine is left out of health checks, as upstream leaves it:
// the skip-remediation annotation, or the paused annotation. In Mirrors mode a pause that only
// marks the mirror of a Machine the Machine API owns (gate.PausedAsMirror) does not opt out.
func (r *Reconciler) optedOut(m *clusterv1.Machine) bool {
	_, skip := m.Annotations[clusterv1.MachineSkipRemediationAnnotation]
	paused := gate.HasPausedAnnotation(m) && (!r.Mirrors || !gate.PausedAsMirror(m))
	return skip || paused
}

// healthy reports whether the target counts as healthy: it has a Node and fails no check,
// not even one whose timeout is still running.
func (t *target) healthy() bool {
	return !t.unhealthy && t.nextCheck == 0 && t.node != nil
}

// targets lists the Machines of the check's Cluster that its selector matches, that are not
// being deleted and have not opted out, with their Nodes read from the workload cluster.
func (r *Reconciler) targets(ctx context.Context, mhc *clusterv1.MachineHealthCheck, cluster *clusterv1.Cluster) ([]*target, error) {
	sel, err := metav1.LabelSelectorAsSelector(&mhc.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("spec.selector: %w", err)
	}
	var list clusterv1.MachineList
	if err := r.Client.List(ctx, &list, client.InNamespace(mhc.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, err
	}
	var out []*target
	needNodes := false
	for i := range list.Items {
		m := &list.Items[i]
		if !m.DeletionTimestamp.IsZero() || m.Spec.ClusterName != mhc.Spec.ClusterName || sel.Empty() || r.optedOut(m) {
			continue
		}
		out = append(out, &target{machine: m})
		needNodes = needNodes || m.Status.NodeRef.IsDefined()
	}
	if !needNodes {
		return out, nil
	}
	wc, err := r.nodeReader(ctx, cluster)
	if err != nil {
		return nil, err
	}
	var nodes corev1.NodeList
	if err := wc.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("listing the Nodes of Cluster %s: %w", cluster.Name, err)
	}
	byName := make(map[string]*corev1.Node, len(nodes.Items))
	for i := range nodes.Items {
		byName[nodes.Items[i].Name] = &nodes.Items[i]
	}
	for _, t := range out {
		if name := t.machine.Status.NodeRef.Name; name != "" {
			if n, ok := byName[name]; ok {
				t.node = n
			} else {
				t.nodeGone = true
			}
		}
	}
	return out, nil
}

// startupTimeout is checks.nodeStartupTimeoutSeconds (10 minutes when unset; 0 disables).
func startupTimeout(mhc *clusterv1.MachineHealthCheck) time.Duration {
	s := clusterv1.DefaultNodeStartupTimeoutSeconds
	if mhc.Spec.Checks.NodeStartupTimeoutSeconds != nil {
		s = *mhc.Spec.Checks.NodeStartupTimeoutSeconds
	}
	return time.Duration(s) * time.Second
}

// trueSince is when condition t turned True, zero when it is not True.
func trueSince(conds []metav1.Condition, t string) time.Time {
	if c := meta.FindStatusCondition(conds, t); c != nil && c.Status == metav1.ConditionTrue {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

// evaluate decides whether the target is unhealthy now, or when it may become so.
func (t *target) evaluate(mhc *clusterv1.MachineHealthCheck, cluster *clusterv1.Cluster, now time.Time) {
	m := t.machine
	if _, ok := m.Annotations[clusterv1.RemediateMachineAnnotation]; ok {
		t.set(clusterv1.MachineHealthCheckHasRemediateAnnotationReason, "the Machine has the "+clusterv1.RemediateMachineAnnotation+" annotation")
		return
	}
	if d := m.Status.Deprecated; d != nil && d.V1Beta1 != nil && (d.V1Beta1.FailureReason != nil || d.V1Beta1.FailureMessage != nil) {
		msg := "the Machine has a terminal failure"
		if d.V1Beta1.FailureMessage != nil {
			msg += ": " + *d.V1Beta1.FailureMessage
		}
		t.set(clusterv1.MachineHealthCheckUnhealthyMachineReason, msg)
		return
	}
	if t.nodeGone {
		t.set(clusterv1.MachineHealthCheckNodeDeletedReason, fmt.Sprintf("Node %s has been deleted", m.Status.NodeRef.Name))
		return
	}
	var reasons []string
	reason := ""
	if t.node == nil {
		if timeout := startupTimeout(mhc); timeout > 0 {
			// Counted from the latest of: the Machine's creation, its infrastructure turning
			// ready, and the Cluster's infrastructure turning ready.
			start := m.CreationTimestamp.Time
			for _, s := range []time.Time{trueSince(m.Status.Conditions, clusterv1.MachineInfrastructureReadyCondition),
				trueSince(cluster.Status.Conditions, clusterv1.ClusterInfrastructureReadyCondition)} {
				if s.After(start) {
					start = s
				}
			}
			if left := start.Add(timeout).Sub(now); left > 0 {
				t.later(left)
			} else {
				t.set(clusterv1.MachineHealthCheckNodeStartupTimeoutReason,
					fmt.Sprintf("no Node within nodeStartupTimeoutSeconds (%s)", timeout))
				return
			}
		}
	} else {
		for _, uc := range mhc.Spec.Checks.UnhealthyNodeConditions {
			for _, c := range t.node.Status.Conditions {
				if c.Type != uc.Type || c.Status != uc.Status {
					continue
				}
				timeout := time.Duration(ptrOr(uc.TimeoutSeconds, 0)) * time.Second
				if left := c.LastTransitionTime.Add(timeout).Sub(now); left > 0 {
					t.later(left)
				} else {
					reason = clusterv1.MachineHealthCheckUnhealthyNodeReason
					reasons = append(reasons, fmt.Sprintf("Node %s condition %s=%s for more than %s", t.node.Name, c.Type, c.Status, timeout))
				}
			}
		}
	}
	for _, uc := range mhc.Spec.Checks.UnhealthyMachineConditions {
		c := meta.FindStatusCondition(m.Status.Conditions, uc.Type)
		if c == nil || c.Status != uc.Status {
			continue
		}
		timeout := time.Duration(ptrOr(uc.TimeoutSeconds, 0)) * time.Second
		if left := c.LastTransitionTime.Add(timeout).Sub(now); left > 0 {
			t.later(left)
		} else {
			if reason == "" {
				reason = clusterv1.MachineHealthCheckUnhealthyMachineReason
			}
			reasons = append(reasons, fmt.Sprintf("Machine condition %s=%s for more than %s", c.Type, c.Status, timeout))
		}
	}
	if len(reasons) > 0 {
		t.set(reason, strings.Join(reasons, "; "))
	}
}

func (t *target) set(reason, msg string) {
	t.unhealthy, t.reason, t.message, t.nextCheck = true, reason, msg, 0
}

func (t *target) later(d time.Duration) {
	if t.nextCheck == 0 || d < t.nextCheck {
		t.nextCheck = d
	}
}

func ptrOr[T any](p *T, d T) T {
	if p == nil {
		return d
	}
	return *p
}

var rangeRe = regexp.MustCompile(`^\[(\d+)-(\d+)\]$`)

// triggerAllows applies remediation.triggerIf: unhealthyInRange "[min-max]" when set, else
// unhealthyLessThanOrEqualTo (a number or a percentage of the targets, rounded down), else
// always. It returns whether remediation is allowed and the most unhealthy Machines that
// would be allowed.
func triggerAllows(mhc *clusterv1.MachineHealthCheck, expected, unhealthy int) (bool, int, error) {
	ti := mhc.Spec.Remediation.TriggerIf
	if ti.UnhealthyInRange != "" {
		g := rangeRe.FindStringSubmatch(strings.ReplaceAll(ti.UnhealthyInRange, " ", ""))
		if g == nil {
			return false, 0, fmt.Errorf("remediation.triggerIf.unhealthyInRange %q is not of the form [min-max]", ti.UnhealthyInRange)
		}
		lo, _ := strconv.Atoi(g[1])
		hi, _ := strconv.Atoi(g[2])
		if lo > hi {
			return false, 0, fmt.Errorf("remediation.triggerIf.unhealthyInRange %q: min is above max", ti.UnhealthyInRange)
		}
		return unhealthy >= lo && unhealthy <= hi, hi, nil
	}
	if ti.UnhealthyLessThanOrEqualTo != nil {
		n, err := intstr.GetScaledValueFromIntOrPercent(ti.UnhealthyLessThanOrEqualTo, expected, false)
		if err != nil {
			return false, 0, fmt.Errorf("remediation.triggerIf.unhealthyLessThanOrEqualTo: %w", err)
		}
		return unhealthy <= n, n, nil
	}
	return true, expected, nil
}

func triggerString(mhc *clusterv1.MachineHealthCheck) string {
	ti := mhc.Spec.Remediation.TriggerIf
	if ti.UnhealthyInRange != "" {
		return "unhealthyInRange " + ti.UnhealthyInRange
	}
	if ti.UnhealthyLessThanOrEqualTo != nil {
		return "unhealthyLessThanOrEqualTo " + ti.UnhealthyLessThanOrEqualTo.String()
	}
	return "always"
}
