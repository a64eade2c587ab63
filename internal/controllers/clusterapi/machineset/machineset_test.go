package machineset_test

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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/server"
	"github.com/machina-dev/machina/internal/controllers/clusterapi"
	ct "github.com/machina-dev/machina/internal/controllers/clusterapi/internal/capitest"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/machineset"
	"github.com/machina-dev/machina/internal/controllers/sim"
	"github.com/machina-dev/machina/internal/scheme"
	"github.com/machina-dev/machina/internal/testenv"
)

var env *testenv.Env

func TestMachineSet(t *testing.T) {
	machineset.SetResumeGrace(resumeGrace)
	env = testenv.Start(t, testenv.Options{Groups: clusterapi.GroupName + "," + sim.GroupName,
		Delays: server.Delays{Pending: 200 * time.Millisecond, ShuttingDown: 200 * time.Millisecond}})
	ct.SetupCluster(t, env)
	ct.NewTemplate(t, env, "small", "s1.small")
	ct.NewTemplate(t, env, "medium", "s1.medium")

	t.Run("ScaleUpClonesTemplatesAndReportsStatus", testScaleUp)
	t.Run("DeletionOrderAndDeleteMachineAnnotation", testDeletionOrder)
	t.Run("AdoptsMatchingOrphans", testAdoption)
	t.Run("TemplateChangeOnlyForNewMachines", testTemplateChange)
	t.Run("TemplateTaintsInPlaceToMachinesAndNodes", testTemplateTaints)
	t.Run("PausedByAnnotationAndCluster", testPaused)
	t.Run("InterruptedCreationFinished", testInterruptedCreation)
	t.Run("DeletionDeletesMachinesFirst", testDeletion)
}

func getSet(ctx context.Context, e *testenv.Env, ms *clusterv1.MachineSet) (*clusterv1.MachineSet, error) {
	got := &clusterv1.MachineSet{}
	return got, e.Client.Get(ctx, client.ObjectKeyFromObject(ms), got)
}

func getSimMachine(t *testing.T, e *testenv.Env, name string) *infrav1.SimMachine {
	t.Helper()
	sm := &infrav1.SimMachine{}
	if err := e.Client.Get(context.Background(), client.ObjectKey{Namespace: ct.NS, Name: name}, sm); err != nil {
		t.Fatal(err)
	}
	return sm
}

// waitStatus waits until the MachineSet's status satisfies ok.
func waitStatus(t *testing.T, e *testenv.Env, ms *clusterv1.MachineSet, what string, ok func(*clusterv1.MachineSet) bool) *clusterv1.MachineSet {
	t.Helper()
	var got *clusterv1.MachineSet
	e.Eventually(60*time.Second, "MachineSet "+ms.Name+": "+what, func(ctx context.Context) (bool, string, error) {
		var err error
		if got, err = getSet(ctx, e, ms); err != nil {
			return false, err.Error(), nil
		}
		s := got.Status
		return ok(got), fmt.Sprintf("replicas %d ready %d available %d upToDate %d %s", ptr.Deref(s.Replicas, -1),
			ptr.Deref(s.ReadyReplicas, -1), ptr.Deref(s.AvailableReplicas, -1), ptr.Deref(s.UpToDateReplicas, -1), ct.Conds(s.Conditions)), nil
	})
	return got
}

func counts(ms *clusterv1.MachineSet, replicas, ready, available, upToDate int32) bool {
	s := ms.Status
	return ptr.Deref(s.Replicas, -1) == replicas && ptr.Deref(s.ReadyReplicas, -1) == ready &&
		ptr.Deref(s.AvailableReplicas, -1) == available && ptr.Deref(s.UpToDateReplicas, -1) == upToDate
}

func testScaleUp(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	ms := ct.MachineSet("ms-basic", 2, "small")
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	machines := ct.WaitRunning(t, e, ms, 2, 90*time.Second)
	for _, m := range machines {
		if m.Labels[clusterv1.ClusterNameLabel] != ct.Cluster || m.Labels[clusterv1.MachineSetNameLabel] != ms.Name || m.Labels["set"] != ms.Name {
			t.Errorf("Machine %s labels %v", m.Name, m.Labels)
		}
		if m.Spec.InfrastructureRef.Kind != "SimMachine" || m.Spec.InfrastructureRef.Name != m.Name || !strings.HasPrefix(m.Name, "ms-basic-") {
			t.Errorf("Machine %s infrastructureRef %+v", m.Name, m.Spec.InfrastructureRef)
		}
		sm := getSimMachine(t, e, m.Name)
		if ref := metav1.GetControllerOf(sm); ref == nil || ref.Kind != "Machine" || ref.UID != m.UID {
			t.Errorf("SimMachine %s controller %+v", sm.Name, ref)
		}
		if sm.Annotations[clusterv1.TemplateClonedFromNameAnnotation] != "small" ||
			sm.Annotations[clusterv1.TemplateClonedFromGroupKindAnnotation] != "SimMachineTemplate.infrastructure.machina.dev" {
			t.Errorf("SimMachine %s annotations %v", sm.Name, sm.Annotations)
		}
		if sm.Labels["from-template"] != "small" || sm.Labels[clusterv1.ClusterNameLabel] != ct.Cluster || sm.Spec.InstanceType != "s1.small" {
			t.Errorf("SimMachine %s labels %v instance type %q", sm.Name, sm.Labels, sm.Spec.InstanceType)
		}
	}
	got := waitStatus(t, e, ms, "2 ready", func(ms *clusterv1.MachineSet) bool { return counts(ms, 2, 2, 2, 2) })
	// Admission adds the cluster-name label to a new MachineSet's selector, as upstream does.
	wantSelector := clusterv1.ClusterNameLabel + "=" + ct.Cluster + ",set=ms-basic"
	if !slices.Contains(got.Finalizers, clusterv1.MachineSetFinalizer) || got.Status.Selector != wantSelector {
		t.Errorf("finalizers %v selector %q", got.Finalizers, got.Status.Selector)
	}
	for tp, want := range map[string]string{clusterv1.MachineSetScalingUpCondition: "False", clusterv1.MachineSetScalingDownCondition: "False",
		clusterv1.MachineSetMachinesReadyCondition: "True", clusterv1.MachineSetMachinesUpToDateCondition: "True",
		clusterv1.PausedCondition: "False", clusterv1.MachineSetDeletingCondition: "False", clusterv1.MachineSetRemediatingCondition: "False"} {
		if c := ct.Condition(got.Status.Conditions, tp); !strings.HasPrefix(c, want+"/") {
			t.Errorf("condition %s = %s, want %s", tp, c, want)
		}
	}

	// The scale subresource reads and writes spec.replicas.
	scale := &autoscalingv1.Scale{}
	if err := e.Client.SubResource("scale").Get(ctx, got, scale); err != nil {
		t.Fatal(err)
	}
	if scale.Spec.Replicas != 2 || scale.Status.Replicas != 2 || scale.Status.Selector != wantSelector {
		t.Errorf("scale %+v", scale)
	}
	scale = &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 3}}
	if err := e.Client.SubResource("scale").Update(ctx, got, client.WithSubResourceBody(scale)); err != nil {
		t.Fatal(err)
	}
	ct.WaitRunning(t, e, ms, 3, 90*time.Second)
	waitStatus(t, e, ms, "3 ready", func(ms *clusterv1.MachineSet) bool { return counts(ms, 3, 3, 3, 3) })
	testVersions(t, e, ms, 3)
}

// testVersions: once their Nodes report in, the n Machines count under their kubelet
// version in status.versions, which the API server accepts.
func testVersions(t *testing.T, e *testenv.Env, ms *clusterv1.MachineSet, n int32) {
	t.Helper()
	got := waitStatus(t, e, ms, fmt.Sprintf("versions: %d under one version", n), func(ms *clusterv1.MachineSet) bool {
		v := ms.Status.Versions
		return len(v) == 1 && v[0].Replicas == n
	})
	machines, err := ct.Machines(context.Background(), e, ms)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range machines {
		if m.Status.NodeInfo == nil || m.Status.NodeInfo.KubeletVersion != got.Status.Versions[0].Version {
			t.Errorf("Machine %s node info %+v, status.versions %v", m.Name, m.Status.NodeInfo, got.Status.Versions)
		}
	}
}

func testDeletionOrder(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	ms := ct.MachineSet("ms-order", 3, "small")
	ms.Spec.Deletion.Order = clusterv1.OldestMachineSetDeletionOrder
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	all := ct.Names(ct.WaitRunning(t, e, ms, 3, 90*time.Second))

	ct.Scale(t, e, ms, 2)
	if got := ct.Names(ct.WaitRunning(t, e, ms, 2, 60*time.Second)); !slices.Equal(got, all[1:]) {
		t.Errorf("Oldest: left %v of %v, want the oldest gone", got, all)
	}
	ct.PatchMachineSet(t, e, ms, func(ms *clusterv1.MachineSet) {
		ms.Spec.Deletion.Order = clusterv1.NewestMachineSetDeletionOrder
		ms.Spec.Replicas = ptr.To[int32](1)
	})
	if got := ct.Names(ct.WaitRunning(t, e, ms, 1, 60*time.Second)); !slices.Equal(got, all[1:2]) {
		t.Errorf("Newest: left %v of %v, want %v", got, all, all[1:2])
	}

	// The delete-machine annotation goes first whatever the order: mark the oldest, ask for
	// Newest.
	ct.Scale(t, e, ms, 3)
	three := ct.WaitRunning(t, e, ms, 3, 90*time.Second)
	marked := three[0]
	base := marked.DeepCopy()
	marked.Annotations = map[string]string{clusterv1.DeleteMachineAnnotation: ""}
	if err := e.Client.Patch(ctx, &marked, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	ct.Scale(t, e, ms, 2)
	if got := ct.Names(ct.WaitRunning(t, e, ms, 2, 60*time.Second)); slices.Contains(got, marked.Name) || !slices.Equal(got, ct.Names(three[1:])) {
		t.Errorf("delete-machine: left %v, want %s gone", got, marked.Name)
	}

	// Random removes the requested number (the remaining ones are healthy).
	ct.PatchMachineSet(t, e, ms, func(ms *clusterv1.MachineSet) {
		ms.Spec.Deletion.Order = clusterv1.RandomMachineSetDeletionOrder
		ms.Spec.Replicas = ptr.To[int32](0)
	})
	ct.WaitRunning(t, e, ms, 0, 60*time.Second)
	waitStatus(t, e, ms, "0 replicas", func(ms *clusterv1.MachineSet) bool { return counts(ms, 0, 0, 0, 0) })
}

func testAdoption(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	// An orphan Machine (with its SimMachine) carrying the set's labels, and one of the same
	// labels in another Cluster that must be left alone.
	for _, o := range []struct{ name, cluster string }{{"orphan-1", ct.Cluster}, {"orphan-other", "other"}} {
		sm := &infrav1.SimMachine{ObjectMeta: metav1.ObjectMeta{Name: o.name, Namespace: ct.NS},
			Spec: infrav1.SimMachineSpec{InstanceSpec: infrav1.InstanceSpec{InstanceType: "s1.small", Image: "sim-rhcos-9"}}}
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: o.name, Namespace: ct.NS, Labels: map[string]string{"set": "ms-adopt"}},
			Spec: clusterv1.MachineSpec{ClusterName: o.cluster, FailureDomain: "sim-east-1a",
				Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To(ct.BootstrapData)},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "SimMachine", Name: o.name}}}
		if err := e.Client.Create(ctx, sm); err != nil {
			t.Fatal(err)
		}
		if err := e.Client.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	// The manager has seen the orphan (its Machine controller added the finalizer) before the
	// MachineSet exists; otherwise the MachineSet may create both Machines from a cache that
	// does not show the orphan yet, and rightly delete one of the three later.
	e.Eventually(30*time.Second, "orphan seen by the manager", func(ctx context.Context) (bool, string, error) {
		m := &clusterv1.Machine{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ct.NS, Name: "orphan-1"}, m); err != nil {
			return false, err.Error(), nil
		}
		return slices.Contains(m.Finalizers, clusterv1.MachineFinalizer), fmt.Sprint(m.Finalizers), nil
	})
	ms := ct.MachineSet("ms-adopt", 2, "small")
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	got := ct.Names(ct.WaitRunning(t, e, ms, 2, 90*time.Second))
	if !slices.Contains(got, "orphan-1") || slices.Contains(got, "orphan-other") {
		t.Errorf("MachineSet Machines %v: want orphan-1 adopted and one created", got)
	}
	other := &clusterv1.Machine{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ct.NS, Name: "orphan-other"}, other); err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(other); ref != nil {
		t.Errorf("Machine of another Cluster adopted: %+v", ref)
	}
	// Adopted Machines count as up to date.
	waitStatus(t, e, ms, "2 up to date", func(ms *clusterv1.MachineSet) bool { return counts(ms, 2, 2, 2, 2) })
	if err := e.Client.Delete(ctx, other); err != nil {
		t.Fatal(err)
	}
	ct.Scale(t, e, ms, 0)
	ct.WaitRunning(t, e, ms, 0, 60*time.Second)
}

func testTemplateChange(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	ms := ct.MachineSet("ms-tmpl", 1, "small")
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	first := ct.WaitRunning(t, e, ms, 1, 90*time.Second)[0]
	ct.PatchMachineSet(t, e, ms, func(ms *clusterv1.MachineSet) { ms.Spec.Template.Spec.InfrastructureRef.Name = "medium" })
	// No silent rollout: the Machine stays, and is reported as not up to date.
	got := waitStatus(t, e, ms, "1 Machine not up to date", func(ms *clusterv1.MachineSet) bool {
		return counts(ms, 1, 1, 1, 0) && ms.Status.ObservedGeneration == ms.Generation
	})
	if c := ct.Condition(got.Status.Conditions, clusterv1.MachineSetMachinesUpToDateCondition); !strings.HasPrefix(c, "False/"+clusterv1.MachineSetMachinesNotUpToDateReason) {
		t.Errorf("MachinesUpToDate %s", c)
	}
	time.Sleep(2 * time.Second)
	if now := ct.WaitRunning(t, e, ms, 1, 10*time.Second); now[0].Name != first.Name {
		t.Fatalf("template change replaced %s with %s", first.Name, now[0].Name)
	}
	if sm := getSimMachine(t, e, first.Name); sm.Spec.InstanceType != "s1.small" {
		t.Errorf("existing SimMachine changed to %s", sm.Spec.InstanceType)
	}
	// Scaling up (asking for new Machines) uses the new template.
	ct.Scale(t, e, ms, 2)
	machines := ct.WaitRunning(t, e, ms, 2, 90*time.Second)
	for _, m := range machines {
		sm := getSimMachine(t, e, m.Name)
		want, wantType := "medium", "s1.medium"
		if m.Name == first.Name {
			want, wantType = "small", "s1.small"
		}
		if sm.Annotations[clusterv1.TemplateClonedFromNameAnnotation] != want || sm.Spec.InstanceType != wantType {
			t.Errorf("SimMachine %s cloned from %q type %s, want %s %s", sm.Name, sm.Annotations[clusterv1.TemplateClonedFromNameAnnotation],
				sm.Spec.InstanceType, want, wantType)
		}
		if _, ok := m.Annotations[machineset.TemplateHashAnnotation]; !ok {
			t.Errorf("Machine %s has no template hash", m.Name)
		}
	}
	waitStatus(t, e, ms, "1 of 2 up to date", func(ms *clusterv1.MachineSet) bool { return counts(ms, 2, 2, 2, 1) })
	ct.Scale(t, e, ms, 0)
	ct.WaitRunning(t, e, ms, 0, 60*time.Second)
}

func testPaused(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	ms := ct.MachineSet("ms-paused", 1, "small")
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	ct.WaitRunning(t, e, ms, 1, 90*time.Second)

	ct.PatchMachineSet(t, e, ms, func(ms *clusterv1.MachineSet) {
		ms.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
		ms.Spec.Replicas = ptr.To[int32](2)
	})
	waitStatus(t, e, ms, "Paused", func(ms *clusterv1.MachineSet) bool {
		return meta.IsStatusConditionTrue(ms.Status.Conditions, clusterv1.PausedCondition)
	})
	time.Sleep(2 * time.Second)
	if m, _ := ct.Machines(ctx, e, ms); len(m) != 1 {
		t.Fatalf("paused MachineSet has %d Machines", len(m))
	}
	// An admission policy keeps users from unpausing a paused object (it could be a mirror of
	// a Machine API resource); the migration controller does it with the manager's identity.
	cfg, err := e.Lab.ManagerConfig()
	if err != nil {
		t.Fatal(err)
	}
	mc, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.Patch(ctx, ms, client.RawPatch(types.JSONPatchType,
		[]byte(`[{"op":"remove","path":"/metadata/annotations/cluster.x-k8s.io~1paused"}]`))); err != nil {
		t.Fatal(err)
	}
	ct.WaitRunning(t, e, ms, 2, 90*time.Second)

	// A paused Cluster pauses its MachineSets too.
	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ct.NS, Name: ct.Cluster}}
	pause := func(p bool) {
		if err := e.Client.Patch(ctx, cl, client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"paused":%v}}`, p))); err != nil {
			t.Fatal(err)
		}
	}
	pause(true)
	t.Cleanup(func() { pause(false) })
	waitStatus(t, e, ms, "Paused by the Cluster", func(ms *clusterv1.MachineSet) bool {
		c := meta.FindStatusCondition(ms.Status.Conditions, clusterv1.PausedCondition)
		return c != nil && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "spec.paused")
	})
	ct.Scale(t, e, ms, 1)
	time.Sleep(2 * time.Second)
	if m, _ := ct.Machines(ctx, e, ms); len(m) != 2 || !m[0].DeletionTimestamp.IsZero() || !m[1].DeletionTimestamp.IsZero() {
		t.Fatalf("MachineSet of a paused Cluster scaled down: %v", ct.Names(m))
	}
	pause(false)
	ct.WaitRunning(t, e, ms, 1, 60*time.Second)
	ct.Scale(t, e, ms, 0)
	ct.WaitRunning(t, e, ms, 0, 60*time.Second)
}

func testDeletion(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	ms := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: ct.NS, Name: "ms-basic"}}
	machines, err := ct.Machines(ctx, e, ms)
	if err != nil || len(machines) != 3 {
		t.Fatalf("ms-basic Machines %v %v", ct.Names(machines), err)
	}
	if err := e.Client.Delete(ctx, ms); err != nil {
		t.Fatal(err)
	}
	sawDeleting := false
	e.Eventually(90*time.Second, "MachineSet deleted after its Machines", func(ctx context.Context) (bool, string, error) {
		// Machines go first: whenever the MachineSet is gone, none of its Machines is left.
		got, err := getSet(ctx, e, ms)
		gone := apierrors.IsNotFound(err)
		var list clusterv1.MachineList
		if lerr := e.Client.List(ctx, &list, client.InNamespace(ct.NS), client.MatchingLabels{clusterv1.MachineSetNameLabel: "ms-basic"}); lerr != nil {
			return false, lerr.Error(), nil
		}
		if gone {
			if len(list.Items) > 0 {
				return false, "", fmt.Errorf("MachineSet gone while %d of its Machines remain", len(list.Items))
			}
			return true, "", nil
		}
		if err != nil {
			return false, err.Error(), nil
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, clusterv1.MachineSetDeletingCondition); c != nil && c.Status == metav1.ConditionTrue {
			sawDeleting = true
		}
		return false, fmt.Sprintf("%d Machines left, finalizers %v", len(list.Items), got.Finalizers), nil
	})
	if !sawDeleting {
		t.Errorf("the Deleting condition was never True")
	}
	for _, m := range machines {
		sm := &infrav1.SimMachine{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ct.NS, Name: m.Name}, sm); !apierrors.IsNotFound(err) {
			t.Errorf("SimMachine %s still there: %v", m.Name, err)
		}
	}
}
