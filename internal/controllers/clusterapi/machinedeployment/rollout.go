package machinedeployment

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/machina-dev/machina/internal/patch"
)

// invalidSpecReason is the condition reason and event reason of a spec this controller
// cannot act on.
const invalidSpecReason = "InvalidSpec"

// strategy is the rollout strategy with maxSurge and maxUnavailable resolved against
// spec.replicas.
type strategy struct {
	onDelete    bool
	replicas    int32
	surge       int32
	unavailable int32
}

// minAvailable is how many Machines must stay available during a rollout.
func (s strategy) minAvailable() int32 { return max(0, s.replicas-s.unavailable) }

// validate checks what the CRD schema cannot and resolves the strategy. Errors name the
// field.
func validate(md *clusterv1.MachineDeployment) (strategy, error) {
	sel, err := metav1.LabelSelectorAsSelector(&md.Spec.Selector)
	switch {
	case err != nil:
		return strategy{}, fmt.Errorf("spec.selector: %v", err)
	case sel.Empty():
		return strategy{}, errors.New("spec.selector is empty: it would select every MachineSet")
	case !sel.Matches(labels.Set(md.Spec.Template.Labels)):
		return strategy{}, fmt.Errorf("spec.selector does not match spec.template.metadata.labels %v", md.Spec.Template.Labels)
	case !md.Spec.Template.Spec.InfrastructureRef.IsDefined():
		return strategy{}, errors.New("spec.template.spec.infrastructureRef is not set")
	}
	st := strategy{replicas: ptr.Deref(md.Spec.Replicas, 0)}
	switch md.Spec.Rollout.Strategy.Type {
	case clusterv1.OnDeleteMachineDeploymentStrategyType:
		st.onDelete = true
		return st, nil
	case "", clusterv1.RollingUpdateMachineDeploymentStrategyType:
	default:
		return strategy{}, fmt.Errorf("spec.rollout.strategy.type: unsupported value %q (RollingUpdate or OnDelete)", md.Spec.Rollout.Strategy.Type)
	}
	ru := md.Spec.Rollout.Strategy.RollingUpdate
	surge, err := resolve(ru.MaxSurge, intstr.FromInt32(1), st.replicas, true, "maxSurge")
	if err != nil {
		return strategy{}, err
	}
	unavailable, err := resolve(ru.MaxUnavailable, intstr.FromInt32(0), st.replicas, false, "maxUnavailable")
	if err != nil {
		return strategy{}, err
	}
	if surge == 0 && unavailable == 0 {
		if isZeroInt(ru.MaxSurge) && isZeroInt(ru.MaxUnavailable) {
			return strategy{}, errors.New("spec.rollout.strategy.rollingUpdate: maxSurge and maxUnavailable cannot both be 0")
		}
		// Percentages that round to nothing: let one Machine go at a time, as Kubernetes
		// Deployments do.
		unavailable = 1
	}
	st.surge, st.unavailable = surge, unavailable
	return st, nil
}

func isZeroInt(v *intstr.IntOrString) bool {
	return v != nil && v.Type == intstr.Int && v.IntVal == 0
}

// resolve turns maxSurge or maxUnavailable into a number of Machines.
func resolve(v *intstr.IntOrString, def intstr.IntOrString, replicas int32, roundUp bool, field string) (int32, error) {
	if v == nil {
		v = &def
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, int(replicas), roundUp)
	if err != nil {
		return 0, fmt.Errorf("spec.rollout.strategy.rollingUpdate.%s: %v", field, err)
	}
	if n < 0 {
		return 0, fmt.Errorf("spec.rollout.strategy.rollingUpdate.%s: must not be negative, got %s", field, v.String())
	}
	return int32(min(n, 1<<30)), nil
}

// plan is what one pass does: the replicas of each MachineSet, and old Machines to mark
// with the delete-machine annotation (unavailable ones, so that scaling their MachineSet
// down takes them first and costs no availability).
type plan struct {
	replicas map[*set]int32
	mark     []*clusterv1.Machine
}

// planRollingUpdate scales old MachineSets down as far as availability allows (at least
// replicas-maxUnavailable Machines stay Available, counting every Machine a scale-down
// might take as available unless it is marked and unavailable), then the new MachineSet up
// as far as the surge allows (Machines, including those still being deleted, stay within
// replicas+maxSurge).
func planRollingUpdate(st strategy, newS *set, olds []*set) plan {
	p := plan{replicas: map[*set]int32{}}
	avail := newS.availableAfterScale()
	for _, s := range olds {
		avail += s.availableAfterScale()
	}
	budget := max(0, avail-st.minAvailable())
	for _, s := range olds {
		var marked, markedAvail int32
		for _, m := range s.active() {
			_, ok := m.Annotations[clusterv1.DeleteMachineAnnotation]
			switch {
			case ok:
				marked++
				if isAvailable(m) {
					markedAvail++
				}
			case !isAvailable(m):
				p.mark = append(p.mark, m)
			}
		}
		// An old MachineSet makes no Machines (disable-machine-create): the Machines it lost
		// (deleted by a user, remediated) are not coming back, and dropping them from its
		// replicas costs nothing and makes room for the new MachineSet.
		cur := min(s.replicas(), int32(len(s.active())))
		k := scaleDownWithin(cur, marked, markedAvail, budget)
		budget -= scaleDownCost(k, marked, markedAvail)
		p.replicas[s] = cur - k
	}
	var oldOccupied int32
	for _, s := range olds {
		oldOccupied += max(p.replicas[s], int32(len(s.machines)))
	}
	allowed := st.replicas + st.surge - oldOccupied - newS.deleting()
	p.replicas[newS] = min(st.replicas, max(newS.replicas(), allowed))
	return p
}

// scaleDownWithin is the largest scale-down (at most cur) whose worst-case cost in
// available Machines fits the budget: the MachineSet deletes its marked Machines first
// (markedAvail of the marked are available), then any.
func scaleDownWithin(cur, marked, markedAvail, budget int32) int32 {
	var k int32
	if budget >= markedAvail {
		k = marked + budget - markedAvail
	} else {
		k = budget
	}
	return max(0, min(k, cur))
}

// scaleDownCost is the worst-case number of available Machines a scale-down by k takes.
func scaleDownCost(k, marked, markedAvail int32) int32 {
	if k <= marked {
		return min(k, markedAvail)
	}
	return markedAvail + k - marked
}

// planOnDelete lets old MachineSets shrink only as their Machines are deleted (by the user):
// each keeps at most the Machines it still has, and the new MachineSet gets the rest. A
// scale-down of the MachineDeployment takes old Machines first.
func planOnDelete(st strategy, newS *set, olds []*set) plan {
	p := plan{replicas: map[*set]int32{}}
	var oldTotal int32
	for _, s := range olds {
		n := min(s.replicas(), int32(len(s.active())))
		p.replicas[s] = n
		oldTotal += n
	}
	excess := oldTotal + newS.replicas() - st.replicas
	for _, s := range olds {
		if excess <= 0 {
			break
		}
		d := min(excess, p.replicas[s])
		p.replicas[s] -= d
		oldTotal -= d
		excess -= d
	}
	p.replicas[newS] = max(0, st.replicas-oldTotal)
	return p
}

// planPaused only scales, and only when one MachineSet has all the replicas (or is the only
// one): a paused MachineDeployment neither starts nor continues a rollout.
func planPaused(st strategy, sets []*set) plan {
	p := plan{replicas: map[*set]int32{}}
	var withReplicas []*set
	for _, s := range sets {
		if s.replicas() > 0 {
			withReplicas = append(withReplicas, s)
		}
	}
	switch {
	case len(sets) == 1:
		p.replicas[sets[0]] = st.replicas
	case len(withReplicas) == 1:
		p.replicas[withReplicas[0]] = st.replicas
	}
	return p
}

// rollout runs one step of the strategy and returns when to look again (0: on events).
func (r *Reconciler) rollout(ctx context.Context, md *clusterv1.MachineDeployment, ds *deploymentSets, st strategy) (time.Duration, error) {
	now := time.Now()
	var next time.Duration
	if a := md.Spec.Rollout.After; !a.IsZero() && a.After(now) {
		next = a.Sub(now) + 100*time.Millisecond
	}
	if md.Spec.Replicas == nil {
		return next, nil // the status says it waits for spec.replicas
	}
	if ptr.Deref(md.Spec.Paused, false) {
		ds.current = newSet(md, ds.sets, rolloutAfter(md, now))
		p := planPaused(st, ds.sets)
		for s, n := range p.replicas {
			if err := r.scaleOnly(ctx, md, s, n); err != nil {
				return 0, err
			}
		}
		return next, nil
	}
	newS, err := findOrBuildNew(md, ds.sets, ds.all, now)
	if err != nil {
		return 0, err
	}
	var olds []*set
	var maxRev int64
	for _, s := range ds.sets {
		if s != newS {
			olds = append(olds, s)
			maxRev = max(maxRev, s.revision())
		}
	}
	var p plan
	if st.onDelete {
		p = planOnDelete(st, newS, olds)
	} else {
		p = planRollingUpdate(st, newS, olds)
		if err := r.markForDeletion(ctx, p.mark); err != nil {
			return 0, err
		}
	}
	rev := newS.revision()
	if rev <= maxRev {
		rev = maxRev + 1
	}
	// Old MachineSets first: what they give up makes room for the new one.
	for _, s := range olds {
		if err := r.syncSet(ctx, md, s, update{replicas: p.replicas[s]}); err != nil {
			return 0, err
		}
	}
	if err := r.syncSet(ctx, md, newS, update{isNew: true, replicas: p.replicas[newS], revision: rev,
		maxReplicas: st.replicas + st.surge}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Created by an earlier pass and not in the cache yet.
			return patch.ConflictRetry, nil
		}
		return 0, err
	}
	if !newS.created {
		newS.created = true
		ds.sets = append(ds.sets, newS)
	}
	ds.current = newS
	setRevision(md, rev)
	return next, r.cleanup(ctx, md, olds)
}

// setRevision records the new MachineSet's revision on the MachineDeployment.
func setRevision(md *clusterv1.MachineDeployment, rev int64) {
	if md.Annotations == nil {
		md.Annotations = map[string]string{}
	}
	md.Annotations[clusterv1.RevisionAnnotation] = fmt.Sprint(rev)
}
