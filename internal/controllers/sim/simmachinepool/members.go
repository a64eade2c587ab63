package simmachinepool

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/labels/format"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/api"
	cloudclient "github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/patch"
)

// replica is one group member with its SimMachine and Machine (either may be nil yet).
type replica struct {
	in       api.GroupInstance
	sm       *infrav1.SimMachine
	m        *clusterv1.Machine
	outdated bool
	chosen   bool // picked for removal in this pass
	gone     bool // terminated in this pass
	removing bool // removed by the pool (its deletion may not be in the cache yet)
}

func (x *replica) deleting() bool {
	return x.m != nil && (!x.m.DeletionTimestamp.IsZero() || x.removing)
}

// victim: removed by the pool, waiting for (or past) its pre-terminate hook.
func (x *replica) victim() bool {
	return x.m != nil && (x.removing || !x.m.DeletionTimestamp.IsZero() && x.m.Annotations[HookAnnotation] != "")
}

func (x *replica) ready() bool {
	return x.m != nil && !x.deleting() && meta.IsStatusConditionTrue(x.m.Status.Conditions, clusterv1.MachineReadyCondition)
}

func (x *replica) atHook() bool {
	c := meta.FindStatusCondition(x.m.Status.Conditions, clusterv1.MachineDeletingCondition)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == clusterv1.MachineDeletingWaitingForPreTerminateHookReason
}

func (x *replica) markedForDeletion() bool {
	_, ok := x.m.Annotations[clusterv1.DeleteMachineAnnotation]
	return ok
}

// listMembers lists the pool's SimMachines and the Machines pointing at them.
func (r *Reconciler) listMembers(ctx context.Context, smp *infrav1.SimMachinePool, _ *clusterv1.MachinePool) ([]infrav1.SimMachine, []clusterv1.Machine, error) {
	var sms infrav1.SimMachineList
	if err := r.Client.List(ctx, &sms, client.InNamespace(smp.Namespace), client.MatchingLabels{PoolLabel: smp.Name}); err != nil {
		return nil, nil, err
	}
	names := map[string]bool{}
	for _, sm := range sms.Items {
		names[sm.Name] = true
	}
	var all clusterv1.MachineList
	if err := r.Client.List(ctx, &all, client.InNamespace(smp.Namespace)); err != nil {
		return nil, nil, err
	}
	var machines []clusterv1.Machine
	for _, m := range all.Items {
		ref := m.Spec.InfrastructureRef
		if ref.Kind == "SimMachine" && ref.APIGroup == infrav1.GroupVersion.Group && names[ref.Name] {
			machines = append(machines, m)
		}
	}
	return sms.Items, machines, nil
}

// reconcileMembers keeps one SimMachine per member, removes dangling ones, moves the
// group's size towards replicas (rolling out template changes) and reports the members. It
// returns whether the pool has settled.
func (r *Reconciler) reconcileMembers(ctx context.Context, smp *infrav1.SimMachinePool, mp *clusterv1.MachinePool, group *api.ScalingGroup, replicas int) (bool, error) {
	sms, machines, err := r.listMembers(ctx, smp, mp)
	if err != nil {
		return false, err
	}
	machineOf := map[string]*clusterv1.Machine{}
	for i := range machines {
		machineOf[machines[i].Spec.InfrastructureRef.Name] = &machines[i]
	}
	byPID := map[string]*replica{}
	var reps []*replica
	for _, in := range group.Instances {
		x := &replica{in: in, outdated: in.LaunchTemplateVersion < group.LaunchTemplateVersion}
		byPID[in.ProviderID] = x
		reps = append(reps, x)
	}
	scaleOnly := smp.Spec.Mode == infrav1.ScaleOnlyMode
	settled := true
	for i := range sms {
		sm := &sms[i]
		m := machineOf[sm.Name]
		x := byPID[sm.Spec.ProviderID]
		if x == nil {
			// The instance is gone (or going): the SimMachine and its Machine dangle.
			settled = false
			if !sm.DeletionTimestamp.IsZero() {
				continue
			}
			if m != nil {
				if err := r.deleteMachine(ctx, m, false, "its instance no longer exists"); err != nil {
					return false, err
				}
				continue
			}
			if err := r.Client.Delete(ctx, sm); err != nil && !apierrors.IsNotFound(err) {
				return false, err
			}
			events.Eventf(r.Recorder, smp, corev1.EventTypeNormal, "DanglingSimMachineDeleted", "Deleted SimMachine %s: instance %s is gone", sm.Name, sm.Spec.ProviderID)
			continue
		}
		x.sm, x.m = sm, m
		x.removing = m != nil && (m.Annotations[HookAnnotation] != "" || r.removingNow(m))
		if m != nil && m.DeletionTimestamp.IsZero() && m.Annotations[HookAnnotation] != "" && !r.removingNow(m) {
			// Hooked but not deleted: a deletion that failed half way is finished.
			if err := r.deleteMachine(ctx, m, true, "the pool removes it"); err != nil {
				return false, err
			}
		}
		if m == nil {
			settled = false
			continue
		}
		if m.DeletionTimestamp.IsZero() && needsRemediation(m) {
			settled = false
			if err := r.remediate(ctx, m, x.in, scaleOnly); err != nil {
				return false, err
			}
		}
		for _, err := range []error{r.releaseSimMachine(ctx, smp, sm), r.syncScaleOnlyLabel(ctx, m, scaleOnly)} {
			if apierrors.IsConflict(err) {
				settled = false // another writer got there first: look again soon
			} else if err != nil {
				return false, err
			}
		}
	}
	for _, x := range reps {
		if x.sm == nil {
			settled = false
			if err := r.createSimMachine(ctx, smp, mp, x.in); err != nil {
				return false, err
			}
		}
	}

	if scaleOnly {
		if group.DesiredCapacity != replicas {
			if _, err := r.setCapacity(ctx, smp, group, replicas); err != nil {
				return false, err
			}
			settled = false
		}
	} else if ok, err := r.scale(ctx, smp, group, reps, replicas); err != nil {
		return false, err
	} else if !ok {
		settled = false
	}
	if len(group.Instances) != replicas {
		settled = false
	}
	setStatus(smp, group)
	outdated := 0
	for _, x := range reps {
		if x.outdated && !x.gone {
			outdated++
		}
	}
	switch {
	case outdated > 0 && !scaleOnly:
		setReady(smp, metav1.ConditionFalse, RollingUpdateReason,
			fmt.Sprintf("%d replica(s) run an older launch template", outdated))
		settled = false
	case len(group.Instances) != replicas || group.DesiredCapacity != replicas:
		setReady(smp, metav1.ConditionFalse, ScalingReason,
			fmt.Sprintf("scaling group %s has %d of %d replicas", group.ScalingGroupID, len(group.Instances), replicas))
	default:
		setReady(smp, metav1.ConditionTrue, GroupReadyReason, "")
	}
	return settled, nil
}

// scale moves a MachinePoolMachines group towards replicas. The group is only ever grown
// directly; it shrinks through pre-terminate hooks of the Machines the pool removes.
func (r *Reconciler) scale(ctx context.Context, smp *infrav1.SimMachinePool, group *api.ScalingGroup, reps []*replica, replicas int) (bool, error) {
	surge := 1
	if smp.Spec.MaxSurge != nil {
		v, err := intstr.GetScaledValueFromIntOrPercent(smp.Spec.MaxSurge, replicas, true)
		if err != nil {
			return false, err
		}
		surge = max(v, 0)
	}
	outdatedAvail := 0
	for _, x := range reps {
		if x.outdated && !x.deleting() {
			outdatedAvail++
		}
	}
	want := replicas + min(surge, outdatedAvail)

	// Machines drained and waiting at our hook: terminate their instances through the group,
	// shrinking it when it is larger than wanted, else letting it replace them.
	for _, x := range reps {
		if x.m == nil || !x.victim() || !x.atHook() {
			continue
		}
		decrement := group.DesiredCapacity > want
		resp, err := r.Cloud.TerminateInstanceInScalingGroup(ctx, x.in.InstanceID, decrement)
		if err != nil && !isNotFound(err) {
			return false, err
		}
		if err == nil {
			group.DesiredCapacity = resp.ScalingGroup.DesiredCapacity
			events.Eventf(r.Recorder, x.m, corev1.EventTypeNormal, "InstanceTerminatedInGroup", "Terminated instance %s in scaling group %s (shrinking: %v)",
				x.in.InstanceID, group.ScalingGroupID, decrement)
		}
		x.gone = true
		if err := r.releaseHook(ctx, x.m); err != nil {
			return false, err
		}
	}

	if group.DesiredCapacity < want {
		if _, err := r.setCapacity(ctx, smp, group, want); err != nil {
			return false, err
		}
	}
	inflight := 0
	for _, x := range reps {
		if !x.gone && x.victim() {
			inflight++
		}
	}
	// Over-provisioned: remove the excess, the replicas whose Machine asks for it first.
	excess := group.DesiredCapacity - want - inflight
	candidates := func(onlyOutdated bool) []*replica {
		var out []*replica
		for _, x := range reps {
			if x.m != nil && !x.deleting() && !x.chosen && (!onlyOutdated || x.outdated) {
				out = append(out, x)
			}
		}
		sort.SliceStable(out, func(i, j int) bool {
			a, b := out[i], out[j]
			if a.markedForDeletion() != b.markedForDeletion() {
				return a.markedForDeletion()
			}
			if a.outdated != b.outdated {
				return a.outdated
			}
			if a.ready() != b.ready() {
				return !a.ready()
			}
			return b.m.CreationTimestamp.Before(&a.m.CreationTimestamp) // newest first
		})
		return out
	}
	var chosen []*replica
	for _, x := range candidates(false) {
		if len(chosen) >= excess {
			break
		}
		x.chosen = true
		chosen = append(chosen, x)
	}
	// Rolling update: remove outdated replicas only while more than replicas are ready.
	ready, outdatedLeft := 0, 0
	for _, x := range reps {
		if x.ready() && !x.chosen {
			ready++
		}
		if x.outdated && !x.deleting() && !x.chosen {
			outdatedLeft++
		}
	}
	if outdatedLeft > 0 {
		n := ready - replicas
		if surge == 0 && inflight == 0 && len(chosen) == 0 && ready >= replicas && len(group.Instances) >= group.DesiredCapacity {
			n = 1 // no surge allowed: one replica at a time is replaced in place
		}
		for _, x := range candidates(true) {
			if n <= 0 {
				break
			}
			x.chosen = true
			chosen = append(chosen, x)
			n--
		}
	}
	for _, x := range chosen {
		r.removing.Store(x.m.UID, time.Now())
		if err := r.deleteMachine(ctx, x.m, true, "the pool removes it"); err != nil {
			r.removing.Delete(x.m.UID)
			return false, err
		}
	}
	return len(chosen) == 0 && inflight == 0 && group.DesiredCapacity == replicas, nil
}

func (r *Reconciler) setCapacity(ctx context.Context, smp *infrav1.SimMachinePool, group *api.ScalingGroup, n int) (*api.ScalingGroup, error) {
	updated, err := r.Cloud.UpdateScalingGroup(ctx, api.UpdateScalingGroupRequest{ScalingGroupID: group.ScalingGroupID, DesiredCapacity: &n})
	if err != nil {
		return nil, err
	}
	events.Eventf(r.Recorder, smp, corev1.EventTypeNormal, "DesiredCapacityChanged", "Scaling group %s: desired capacity %d -> %d",
		group.ScalingGroupID, group.DesiredCapacity, n)
	group.DesiredCapacity = updated.DesiredCapacity
	return updated, nil
}

// createSimMachine creates the SimMachine of a new member; it adopts the instance by
// spec.providerID once its Machine exists. Named after the instance, creation is idempotent.
func (r *Reconciler) createSimMachine(ctx context.Context, smp *infrav1.SimMachinePool, mp *clusterv1.MachinePool, in api.GroupInstance) error {
	sm := &infrav1.SimMachine{
		ObjectMeta: metav1.ObjectMeta{
			Name: smp.Name + "-" + in.InstanceID, Namespace: smp.Namespace,
			Labels: map[string]string{
				clusterv1.ClusterNameLabel:     mp.Spec.ClusterName,
				clusterv1.MachinePoolNameLabel: format.MustFormatValue(mp.Name),
				PoolLabel:                      smp.Name,
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: infrav1.GroupVersion.String(), Kind: "SimMachinePool",
				Name: smp.Name, UID: smp.UID}},
		},
		Spec: infrav1.SimMachineSpec{InstanceSpec: smp.Spec.Template, ProviderID: in.ProviderID, Zone: in.Zone},
	}
	if err := r.Client.Create(ctx, sm); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating SimMachine %s: %w", sm.Name, err)
	}
	return nil
}

// ownedByMachine reports whether a Machine owns the SimMachine.
func ownedByMachine(sm *infrav1.SimMachine) bool {
	for _, ref := range sm.OwnerReferences {
		if ref.Kind == "Machine" && ref.APIVersion == clusterv1.GroupVersion.String() {
			return true
		}
	}
	return false
}

// releaseSimMachine drops the pool's owner reference once a Machine owns the SimMachine.
func (r *Reconciler) releaseSimMachine(ctx context.Context, smp *infrav1.SimMachinePool, sm *infrav1.SimMachine) error {
	if !ownedByMachine(sm) {
		return nil
	}
	var refs []metav1.OwnerReference
	for _, ref := range sm.OwnerReferences {
		if ref.UID != smp.UID {
			refs = append(refs, ref)
		}
	}
	_, err := patch.Locked(ctx, r.Client, sm, func() bool {
		changed := len(refs) != len(sm.OwnerReferences)
		sm.OwnerReferences = refs
		return changed
	})
	return client.IgnoreNotFound(err)
}

// syncScaleOnlyLabel marks (or unmarks) a Machine whose deletion the admission policy refuses.
func (r *Reconciler) syncScaleOnlyLabel(ctx context.Context, m *clusterv1.Machine, want bool) error {
	_, has := m.Labels[ScaleOnlyLabel]
	if has == want || !m.DeletionTimestamp.IsZero() {
		return nil
	}
	_, err := patch.Locked(ctx, r.Client, m, func() bool {
		if want {
			if m.Labels == nil {
				m.Labels = map[string]string{}
			}
			m.Labels[ScaleOnlyLabel] = "true"
		} else {
			delete(m.Labels, ScaleOnlyLabel)
		}
		return true
	})
	return client.IgnoreNotFound(err)
}

// deleteMachine deletes a Machine of the pool. With hook, the Machine carries the pool's
// pre-terminate hook (its Node is drained, then the pool terminates the instance through the
// group); without, its instance is gone and draining is skipped.
func (r *Reconciler) deleteMachine(ctx context.Context, m *clusterv1.Machine, hook bool, why string) error {
	if !m.DeletionTimestamp.IsZero() {
		if !hook {
			// Its instance is gone already: nothing for the hook to wait for.
			return r.releaseHook(ctx, m)
		}
		return nil
	}
	if _, err := patch.Locked(ctx, r.Client, m, func() bool {
		delete(m.Labels, ScaleOnlyLabel)
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		if hook {
			m.Annotations[HookAnnotation] = HookOwner
		} else {
			delete(m.Annotations, HookAnnotation)
			m.Annotations[clusterv1.ExcludeNodeDrainingAnnotation] = "instance gone"
			m.Annotations[clusterv1.ExcludeWaitForNodeVolumeDetachAnnotation] = "instance gone"
		}
		return true
	}); err != nil {
		return client.IgnoreNotFound(err)
	}
	if err := r.Client.Delete(ctx, m, client.Preconditions{UID: &m.UID}); err != nil {
		return client.IgnoreNotFound(err)
	}
	events.Eventf(r.Recorder, m, corev1.EventTypeNormal, "MachinePoolMachineDeleted", "Deleted Machine %s: %s", m.Name, why)
	return nil
}

// releaseHook removes the pool's pre-terminate hook so the Machine's deletion goes on.
func (r *Reconciler) releaseHook(ctx context.Context, m *clusterv1.Machine) error {
	if _, ok := m.Annotations[HookAnnotation]; !ok {
		return nil
	}
	// Without a lock: removing one annotation is right whatever else changed, and the
	// Machine's own controller writes to a Machine being deleted all the time.
	before := m.DeepCopy()
	delete(m.Annotations, HookAnnotation)
	return client.IgnoreNotFound(r.Client.Patch(ctx, m, client.MergeFrom(before)))
}

func isNotFound(err error) bool { return cloudclient.IsNotFound(err) }

// removingNow reports a Machine this controller deleted as a victim a moment ago: until the
// cache shows its deletion, it must not be counted (or chosen) again.
func (r *Reconciler) removingNow(m *clusterv1.Machine) bool {
	v, ok := r.removing.Load(m.UID)
	if !ok {
		return false
	}
	if !m.DeletionTimestamp.IsZero() || time.Since(v.(time.Time)) > time.Minute {
		r.removing.Delete(m.UID)
		return false
	}
	return true
}
