package machinedeployment_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ct "github.com/machina-dev/machina/internal/controllers/clusterapi/internal/capitest"
)

func testCreateAndScale(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	md := newMD("md-basic", 2, "small")
	create(t, e, md)
	got := waitSettled(t, e, md)
	ms := onlySet(t, e, md)
	hash := ms.Labels[clusterv1.MachineDeploymentUniqueLabel]
	if hash == "" || ms.Name != md.Name+"-"+hash || ms.Labels[clusterv1.MachineDeploymentNameLabel] != md.Name ||
		ms.Spec.Selector.MatchLabels[clusterv1.MachineDeploymentUniqueLabel] != hash {
		t.Errorf("MachineSet %s labels %v selector %v", ms.Name, ms.Labels, ms.Spec.Selector.MatchLabels)
	}
	if ms.Annotations[clusterv1.RevisionAnnotation] != "1" || got.Annotations[clusterv1.RevisionAnnotation] != "1" {
		t.Errorf("revisions: MachineSet %v MachineDeployment %v", ms.Annotations, got.Annotations)
	}
	if !slices.Contains(got.Finalizers, clusterv1.MachineDeploymentFinalizer) || got.Labels[clusterv1.ClusterNameLabel] != ct.Cluster ||
		got.Status.Selector != "md=md-basic" || got.Status.Phase != string(clusterv1.MachineDeploymentPhaseRunning) {
		t.Errorf("finalizers %v labels %v selector %q phase %q", got.Finalizers, got.Labels, got.Status.Selector, got.Status.Phase)
	}
	for tp, want := range map[string]string{clusterv1.AvailableCondition: "True/" + clusterv1.MachineDeploymentAvailableReason,
		clusterv1.RollingOutCondition:    "False/" + clusterv1.MachineDeploymentNotRollingOutReason,
		clusterv1.ScalingUpCondition:     "False/" + clusterv1.MachineDeploymentNotScalingUpReason,
		clusterv1.ScalingDownCondition:   "False/" + clusterv1.MachineDeploymentNotScalingDownReason,
		clusterv1.RemediatingCondition:   "False/" + clusterv1.MachineDeploymentNotRemediatingReason,
		clusterv1.MachinesReadyCondition: "True/", clusterv1.MachinesUpToDateCondition: "True/",
		clusterv1.PausedCondition: "False/", clusterv1.DeletingCondition: "False/"} {
		if c := ct.Condition(got.Status.Conditions, tp); !strings.HasPrefix(c, want) {
			t.Errorf("condition %s = %s, want %s", tp, c, want)
		}
	}
	cols, cells := row(t, e, md.Name)
	want := []string{"Name=md-basic", "Cluster=main", "Available=True", "Desired=2", "Current=2", "Ready=2", "Available=2",
		"Up-to-date=2", "Paused=False", "Phase=Running"}
	var pairs []string
	for i := range cols {
		pairs = append(pairs, cols[i]+"="+cells[i])
	}
	if !containsAll(pairs, want...) {
		t.Errorf("kubectl get machinedeployments: %v, want %v", pairs, want)
	}

	// kubectl scale: the scale subresource reads status.selector and writes spec.replicas.
	scale := &autoscalingv1.Scale{}
	if err := e.Client.SubResource("scale").Get(ctx, got, scale); err != nil {
		t.Fatal(err)
	}
	if scale.Spec.Replicas != 2 || scale.Status.Replicas != 2 || scale.Status.Selector != "md=md-basic" {
		t.Errorf("scale %+v", scale)
	}
	for _, n := range []int32{3, 1} {
		scale = &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: n}}
		if err := e.Client.SubResource("scale").Update(ctx, got, client.WithSubResourceBody(scale)); err != nil {
			t.Fatal(err)
		}
		waitSettled(t, e, md)
		if now := onlySet(t, e, md); now.UID != ms.UID || ptr.Deref(now.Spec.Replicas, -1) != n {
			t.Errorf("scaling to %d: MachineSet %s (%s) replicas %d, want %s scaled", n, now.Name, now.UID, ptr.Deref(now.Spec.Replicas, -1), ms.Name)
		}
	}

	// status.versions counts the one Machine left under its kubelet version, as its
	// MachineSet's does.
	got = waitMD(t, e, md, "versions: 1 Machine", func(md *clusterv1.MachineDeployment) bool {
		return len(md.Status.Versions) == 1 && md.Status.Versions[0].Replicas == 1
	})
	e.Eventually(time.Minute, "MachineSet versions match", func(context.Context) (bool, string, error) {
		set := onlySet(t, e, md)
		return fmt.Sprint(set.Status.Versions) == fmt.Sprint(got.Status.Versions),
			fmt.Sprintf("MachineSet %v MachineDeployment %v", set.Status.Versions, got.Status.Versions), nil
	})
}

func testRollingUpdate(t *testing.T) {
	e := env.For(t)
	md := newMD("md-roll", 3, "small")
	rolling(md, intstr.FromInt32(1), intstr.FromInt32(0))
	create(t, e, md)
	waitSettled(t, e, md)
	first := onlySet(t, e, md)
	before := uids(machines(t, e, md))

	// maxSurge 1, maxUnavailable 0: at most 4 Machines, never fewer than 3 available.
	obs := observe(t, e, md, 4, 3)
	patchMD(t, e, md, func(md *clusterv1.MachineDeployment) { md.Spec.Template.Spec.InfrastructureRef.Name = "medium" })
	waitMD(t, e, md, "rolled out to revision 2", func(md *clusterv1.MachineDeployment) bool {
		return settled(md) && md.Annotations[clusterv1.RevisionAnnotation] == "2"
	})
	second := waitOneSet(t, e, md)
	obs.finish(t)
	now := machines(t, e, md)
	for _, m := range now {
		if _, old := before[m.Name]; old {
			t.Errorf("Machine %s was not replaced", m.Name)
		}
	}
	clonedFrom(t, e, now, "medium")
	if second.Name == first.Name || second.Annotations[clusterv1.RevisionAnnotation] != "2" {
		t.Errorf("new MachineSet %s revision %s (old %s)", second.Name, second.Annotations[clusterv1.RevisionAnnotation], first.Name)
	}

	// maxSurge 0, maxUnavailable 1: never more than 3 Machines, at least 2 available.
	obs = observe(t, e, md, 3, 2)
	patchMD(t, e, md, func(md *clusterv1.MachineDeployment) {
		rolling(md, intstr.FromInt32(0), intstr.FromInt32(1))
		md.Spec.Template.Spec.InfrastructureRef.Name = "small"
	})
	waitMD(t, e, md, "rolled out to revision 3", func(md *clusterv1.MachineDeployment) bool {
		return settled(md) && md.Annotations[clusterv1.RevisionAnnotation] == "3"
	})
	waitOneSet(t, e, md)
	obs.finish(t)
	clonedFrom(t, e, machines(t, e, md), "small")
}

func testScaleDuringRollout(t *testing.T) {
	e := env.For(t)
	md := newMD("md-scale", 2, "small")
	rolling(md, intstr.FromInt32(1), intstr.FromInt32(0))
	create(t, e, md)
	waitSettled(t, e, md)
	patchMD(t, e, md, func(md *clusterv1.MachineDeployment) { md.Spec.Template.Spec.InfrastructureRef.Name = "medium" })
	e.Eventually(time.Minute, "rollout under way", func(context.Context) (bool, string, error) {
		s := sets(t, e, md)
		return len(s) == 2, fmt.Sprint(setNames(s)), nil
	})
	ct.Patch(t, e, md, func(md *clusterv1.MachineDeployment) { md.Spec.Replicas = ptr.To[int32](4) })
	waitMD(t, e, md, "4 replicas at revision 2", func(md *clusterv1.MachineDeployment) bool {
		return settled(md) && md.Annotations[clusterv1.RevisionAnnotation] == "2"
	})
	waitOneSet(t, e, md)
	now := machines(t, e, md)
	if len(now) != 4 {
		t.Errorf("%d Machines, want 4", len(now))
	}
	clonedFrom(t, e, now, "medium")
}

func testOnDelete(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	md := newMD("md-ondelete", 2, "small")
	md.Spec.Rollout.Strategy.Type = clusterv1.OnDeleteMachineDeploymentStrategyType
	create(t, e, md)
	waitSettled(t, e, md)
	old := machines(t, e, md)
	patchMD(t, e, md, func(md *clusterv1.MachineDeployment) { md.Spec.Template.Spec.InfrastructureRef.Name = "medium" })
	waitMD(t, e, md, "new MachineSet made, nothing replaced", func(md *clusterv1.MachineDeployment) bool {
		return md.Status.ObservedGeneration == md.Generation && ptr.Deref(md.Status.UpToDateReplicas, -1) == 0 &&
			md.Annotations[clusterv1.RevisionAnnotation] == "2" &&
			meta.IsStatusConditionTrue(md.Status.Conditions, clusterv1.MachineDeploymentRollingOutCondition)
	})
	if got := uids(machines(t, e, md)); len(got) != 2 || got[old[0].Name] != string(old[0].UID) || got[old[1].Name] != string(old[1].UID) {
		t.Fatalf("Machines %v, want the old ones untouched", got)
	}

	// The user deletes one old Machine: its replacement comes from the new template, the
	// other old Machine stays.
	if err := e.Client.Delete(ctx, &old[0]); err != nil {
		t.Fatal(err)
	}
	waitMD(t, e, md, "one Machine replaced", func(md *clusterv1.MachineDeployment) bool {
		return ptr.Deref(md.Status.UpToDateReplicas, -1) == 1 && ptr.Deref(md.Status.AvailableReplicas, -1) == 2 &&
			ptr.Deref(md.Status.Replicas, -1) == 2
	})
	got := uids(machines(t, e, md))
	if got[old[1].Name] != string(old[1].UID) {
		t.Fatalf("Machines %v: %s should still be there", got, old[1].Name)
	}
	if err := e.Client.Delete(ctx, &old[1]); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, e, md)
	waitOneSet(t, e, md)
	clonedFrom(t, e, machines(t, e, md), "medium")
}

func testPause(t *testing.T) {
	e := env.For(t)
	md := newMD("md-pause", 2, "small")
	create(t, e, md)
	waitSettled(t, e, md)
	before := uids(machines(t, e, md))

	patchMD(t, e, md, func(md *clusterv1.MachineDeployment) {
		md.Spec.Paused = ptr.To(true)
		md.Spec.Template.Spec.InfrastructureRef.Name = "medium"
	})
	waitMD(t, e, md, "rollout on hold", func(md *clusterv1.MachineDeployment) bool {
		c := meta.FindStatusCondition(md.Status.Conditions, clusterv1.MachineDeploymentRollingOutCondition)
		return md.Status.ObservedGeneration == md.Generation && c != nil && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "on hold")
	})
	onlySet(t, e, md)
	// A paused MachineDeployment still scales (its current MachineSet, old template).
	patchMD(t, e, md, func(md *clusterv1.MachineDeployment) { md.Spec.Replicas = ptr.To[int32](3) })
	waitMD(t, e, md, "scaled to 3 while paused", func(md *clusterv1.MachineDeployment) bool {
		return md.Status.ObservedGeneration == md.Generation && ptr.Deref(md.Status.AvailableReplicas, -1) == 3 &&
			ptr.Deref(md.Status.UpToDateReplicas, -1) == 0
	})
	onlySet(t, e, md)
	got := uids(machines(t, e, md))
	for name, uid := range before {
		if got[name] != uid {
			t.Errorf("paused MachineDeployment replaced %s", name)
		}
	}
	patchMD(t, e, md, func(md *clusterv1.MachineDeployment) { md.Spec.Paused = nil })
	waitMD(t, e, md, "resumed and rolled out", func(md *clusterv1.MachineDeployment) bool {
		return settled(md) && md.Annotations[clusterv1.RevisionAnnotation] == "2"
	})
	waitOneSet(t, e, md)
	clonedFrom(t, e, machines(t, e, md), "medium")

	// The paused annotation stops everything, status included, until it is removed.
	patchMD(t, e, md, func(md *clusterv1.MachineDeployment) {
		md.Annotations[clusterv1.PausedAnnotation] = ""
		md.Spec.Template.Spec.InfrastructureRef.Name = "small-b"
	})
	waitMD(t, e, md, "Paused", func(md *clusterv1.MachineDeployment) bool {
		return md.Status.ObservedGeneration == md.Generation && meta.IsStatusConditionTrue(md.Status.Conditions, clusterv1.PausedCondition)
	})
	onlySet(t, e, md)
	unpause(t, e, md)
	waitMD(t, e, md, "unpaused and rolled out", func(md *clusterv1.MachineDeployment) bool {
		return settled(md) && md.Annotations[clusterv1.RevisionAnnotation] == "3" &&
			meta.IsStatusConditionFalse(md.Status.Conditions, clusterv1.PausedCondition)
	})
	waitOneSet(t, e, md)
	clonedFrom(t, e, machines(t, e, md), "small-b")
}

func testRolloutAfter(t *testing.T) {
	e := env.For(t)
	md := newMD("md-after", 2, "small")
	create(t, e, md)
	waitSettled(t, e, md)
	first := onlySet(t, e, md)
	before := uids(machines(t, e, md))
	patchMD(t, e, md, func(md *clusterv1.MachineDeployment) {
		md.Spec.Rollout.After = metav1.NewTime(time.Now().Add(3 * time.Second))
	})
	waitMD(t, e, md, "rolled out after spec.rollout.after", func(md *clusterv1.MachineDeployment) bool {
		return settled(md) && md.Annotations[clusterv1.RevisionAnnotation] == "2"
	})
	second := waitOneSet(t, e, md)
	if second.Name == first.Name || second.CreationTimestamp.Before(&md.Spec.Rollout.After) {
		t.Errorf("new MachineSet %s created %s, old %s, after %s", second.Name, second.CreationTimestamp, first.Name, md.Spec.Rollout.After)
	}
	for _, m := range machines(t, e, md) {
		if _, old := before[m.Name]; old {
			t.Errorf("Machine %s was not replaced", m.Name)
		}
	}
}

func testRollback(t *testing.T) {
	e := env.For(t)
	md := newMD("md-back", 2, "small")
	create(t, e, md)
	waitSettled(t, e, md)
	revA := onlySet(t, e, md)
	atRevision := func(rev string) func(*clusterv1.MachineDeployment) bool {
		return func(md *clusterv1.MachineDeployment) bool {
			return settled(md) && md.Annotations[clusterv1.RevisionAnnotation] == rev
		}
	}
	patchMD(t, e, md, func(md *clusterv1.MachineDeployment) { md.Spec.Template.Spec.InfrastructureRef.Name = "medium" })
	waitMD(t, e, md, "revision 2", atRevision("2"))
	waitOneSet(t, e, md)

	// Back to the first template after its MachineSet was deleted (v1beta2 keeps no history):
	// a MachineSet of the same name (the same template hash) comes back as revision 3.
	patchMD(t, e, md, func(md *clusterv1.MachineDeployment) { md.Spec.Template.Spec.InfrastructureRef.Name = "small" })
	waitMD(t, e, md, "revision 3", atRevision("3"))
	back := waitOneSet(t, e, md)
	if back.Name != revA.Name || back.UID == revA.UID || back.Annotations[clusterv1.RevisionAnnotation] != "3" {
		t.Errorf("rolled back to %s (%s) revision %s, want a new %s", back.Name, back.UID, back.Annotations[clusterv1.RevisionAnnotation], revA.Name)
	}
	clonedFrom(t, e, machines(t, e, md), "small")

	// Reverting while the old MachineSet still exists reuses it, bumping its revision.
	before := uids(machines(t, e, md))
	patchMD(t, e, md, func(md *clusterv1.MachineDeployment) {
		md.Spec.Rollout.Strategy.Type = clusterv1.OnDeleteMachineDeploymentStrategyType
		md.Spec.Template.Spec.InfrastructureRef.Name = "medium"
	})
	e.Eventually(time.Minute, "revision 4 made", func(context.Context) (bool, string, error) {
		s := sets(t, e, md)
		return len(s) == 2, fmt.Sprint(setNames(s)), nil
	})
	patchMD(t, e, md, func(md *clusterv1.MachineDeployment) { md.Spec.Template.Spec.InfrastructureRef.Name = "small" })
	waitMD(t, e, md, "revision 5", atRevision("5"))
	reused := waitOneSet(t, e, md)
	if reused.UID != back.UID || reused.Annotations[clusterv1.RevisionAnnotation] != "5" {
		t.Errorf("MachineSet %s (%s) revision %s, want %s reused as revision 5", reused.Name, reused.UID,
			reused.Annotations[clusterv1.RevisionAnnotation], back.Name)
	}
	if got := uids(machines(t, e, md)); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Errorf("Machines %v, want %v untouched", got, before)
	}
}

func testDeletion(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ct.NS, Name: "md-basic"}}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(md), md); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Delete(ctx, md); err != nil {
		t.Fatal(err)
	}
	e.Eventually(2*time.Minute, "MachineDeployment deleted after its MachineSets", func(ctx context.Context) (bool, string, error) {
		var list clusterv1.MachineSetList
		if err := e.Client.List(ctx, &list, client.InNamespace(ct.NS),
			client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md.Name}); err != nil {
			return false, err.Error(), nil
		}
		err := e.Client.Get(ctx, client.ObjectKeyFromObject(md), md)
		if apierrors.IsNotFound(err) {
			if len(list.Items) > 0 {
				return false, "", fmt.Errorf("MachineDeployment gone while %d MachineSets remain", len(list.Items))
			}
			return true, "", nil
		}
		return false, fmt.Sprintf("%d MachineSets left; %s", len(list.Items), ct.Condition(md.Status.Conditions, clusterv1.DeletingCondition)), err
	})
	if left := machines(t, e, md); len(left) > 0 {
		t.Errorf("Machines left: %d", len(left))
	}
}
