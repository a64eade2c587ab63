package machinepool_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/server"
	"github.com/machina-dev/machina/internal/controllers/clusterapi"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/capitest"
	"github.com/machina-dev/machina/internal/controllers/sim"
	"github.com/machina-dev/machina/internal/controllers/sim/simmachine"
	"github.com/machina-dev/machina/internal/controllers/sim/simmachinepool"
	"github.com/machina-dev/machina/internal/testenv"
)

var env *testenv.Env

// TestMachinePools runs the MachinePool and SimMachinePool controllers (with the Cluster,
// Machine and SimMachine controllers) against the lab and the simulated cloud. Each subtest
// has a pool of its own.
func TestMachinePools(t *testing.T) {
	env = testenv.Start(t, testenv.Options{Groups: clusterapi.GroupName + "," + sim.GroupName,
		Delays: server.Delays{Pending: 300 * time.Millisecond, ShuttingDown: 300 * time.Millisecond}})
	newCluster(t, env)

	t.Run("R1_MachinePerInstanceAndCascadingDelete", testMachinePerInstance)
	t.Run("R1_VanishedInstanceIsReplaced", testVanishedInstance)
	t.Run("ScaleDownHonoursDeleteMachine", testScaleDown)
	t.Run("R4_DeletingAPoolMachineDrainsItsNode", testDrain)
	t.Run("R2_HealthCheckRemediatesAPoolMachine", testHealthCheck)
	t.Run("R3_RollingUpdateKeepsReadyReplicas", testRollingUpdate)
	t.Run("R3_RollingUpdateWithoutSurge", testRollingWithoutSurge)
	t.Run("ScaleDownSurvivesARestart", testRestartDuringScaleDown)
	t.Run("ScaleOnlyRefusesMachineDeletion", testScaleOnly)
	t.Run("Paused", testPaused)
	t.Run("TemplateMetadataInPlace", testTemplateInPlace)
	t.Run("PoolDeletion", testPoolDeletion)
}

func testMachinePerInstance(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	newPool(t, e, "r1", 2, nil)
	ms := waitPool(t, e, "r1", 2, 90*time.Second)
	g := group(t, e, "r1")
	if g.DesiredCapacity != 2 || len(g.Instances) != 2 {
		t.Fatalf("group: desired %d members %d", g.DesiredCapacity, len(g.Instances))
	}
	var groupIDs []string
	for _, in := range g.Instances {
		groupIDs = append(groupIDs, in.ProviderID)
	}
	sort.Strings(groupIDs)

	var machineIDs []string
	for _, m := range ms {
		machineIDs = append(machineIDs, m.Spec.ProviderID)
		if ref := metav1.GetControllerOf(&m); ref == nil || ref.Kind != "MachinePool" || ref.Name != "r1" {
			t.Errorf("Machine %s controller %v", m.Name, ref)
		}
		if m.Spec.InfrastructureRef.Kind != "SimMachine" || m.Spec.Bootstrap.ConfigRef.IsDefined() || ptr.Deref(m.Spec.Bootstrap.DataSecretName, "x") != "" {
			t.Errorf("Machine %s: infrastructureRef %+v bootstrap %+v", m.Name, m.Spec.InfrastructureRef, m.Spec.Bootstrap)
		}
		if !strings.HasPrefix(capitest.Condition(m.Status.Conditions, clusterv1.MachineBootstrapConfigReadyCondition), "True/") {
			t.Errorf("Machine %s BootstrapConfigReady %s", m.Name, capitest.Condition(m.Status.Conditions, clusterv1.MachineBootstrapConfigReadyCondition))
		}
		if m.Labels["pool"] != "r1" || m.Status.NodeRef.Name == "" {
			t.Errorf("Machine %s labels %v nodeRef %v", m.Name, m.Labels, m.Status.NodeRef)
		}
		sm := &infrav1.SimMachine{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.Spec.InfrastructureRef.Name}, sm); err != nil {
			t.Fatal(err)
		}
		if ref := metav1.GetControllerOf(sm); ref == nil || ref.Kind != "Machine" || ref.Name != m.Name || len(sm.OwnerReferences) != 1 {
			t.Errorf("SimMachine %s owners %v: want only its Machine", sm.Name, sm.OwnerReferences)
		}
		if sm.Labels[clusterv1.MachinePoolNameLabel] != "r1" || sm.Labels[clusterv1.ClusterNameLabel] != clusterName {
			t.Errorf("SimMachine %s labels %v", sm.Name, sm.Labels)
		}
		if sm.Spec.ProviderID != m.Spec.ProviderID || instanceOf(t, e, sm.Spec.ProviderID).ScalingGroupID != g.ScalingGroupID {
			t.Errorf("SimMachine %s providerID %s, Machine %s", sm.Name, sm.Spec.ProviderID, m.Spec.ProviderID)
		}
		// The SimMachine adopted the group's instance: it never launched one of its own.
		if own := e.InstancesTagged(simmachine.TagSimMachineUID, string(sm.UID)); len(own) != 0 {
			t.Errorf("SimMachine %s launched %d instance(s) of its own", sm.Name, len(own))
		}
	}
	sort.Strings(machineIDs)
	mp := &clusterv1.MachinePool{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "r1"}, mp); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(groupIDs, machineIDs) || !slices.Equal(mp.Spec.ProviderIDList, groupIDs) || len(mp.Status.NodeRefs) != 2 ||
		mp.Status.Phase != string(clusterv1.MachinePoolPhaseRunning) {
		t.Errorf("group %v, Machines %v, MachinePool providerIDList %v nodeRefs %d phase %s", groupIDs, machineIDs,
			mp.Spec.ProviderIDList, len(mp.Status.NodeRefs), mp.Status.Phase)
	}
	// status.versions counts the two Machines under the kubelet version their Nodes report.
	e.Eventually(time.Minute, "pool r1: versions count 2 Machines", func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "r1"}, mp); err != nil {
			return false, err.Error(), nil
		}
		now, err := poolMachines(ctx, e, "r1")
		if err != nil || len(now) == 0 {
			return false, fmt.Sprintf("Machines %d: %v", len(now), err), nil
		}
		v, info := mp.Status.Versions, now[0].Status.NodeInfo
		return len(v) == 1 && v[0].Replicas == 2 && info != nil && v[0].Version == info.KubeletVersion,
			fmt.Sprintf("versions %v, Machine %s node info %+v", v, now[0].Name, info), nil
	})
	smp := &infrav1.SimMachinePool{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "r1"}, smp); err != nil {
		t.Fatal(err)
	}
	if smp.Status.InfrastructureMachineKind != "SimMachine" || metav1.GetControllerOf(smp) == nil || metav1.GetControllerOf(smp).UID != mp.UID {
		t.Errorf("SimMachinePool kind %q owners %v", smp.Status.InfrastructureMachineKind, smp.OwnerReferences)
	}

	if ev := capitest.EventReasons(t, e, "r1"); contains(ev, "LaunchTemplateUpdated") || g.LaunchTemplateVersion != 1 {
		t.Errorf("an unchanged template was updated: version %d, events %v", g.LaunchTemplateVersion, ev)
	}

	// An owner reference removed by hand is restored.
	m0 := ms[0].DeepCopy()
	base := m0.DeepCopy()
	m0.OwnerReferences = nil
	if err := e.Client.Patch(ctx, m0, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	e.Eventually(30*time.Second, "owner reference restored", func(ctx context.Context) (bool, string, error) {
		m := &clusterv1.Machine{}
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(m0), m); err != nil {
			return false, err.Error(), nil
		}
		ref := metav1.GetControllerOf(m)
		return ref != nil && ref.UID == mp.UID, fmt.Sprintf("owners %v", m.OwnerReferences), nil
	})

	// Deleting a Machine deletes its SimMachine and instance; the pool replaces it.
	victim := ms[0]
	sm := &infrav1.SimMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: victim.Spec.InfrastructureRef.Name}}
	if err := e.Client.Delete(ctx, &victim); err != nil {
		t.Fatal(err)
	}
	capitest.WaitGone(t, e, &victim, 60*time.Second)
	capitest.WaitGone(t, e, sm, 30*time.Second)
	if st := instanceOf(t, e, victim.Spec.ProviderID).State; st != api.StateTerminated && st != api.StateShuttingDown {
		t.Errorf("instance of the deleted Machine is %s", st)
	}
	after := waitPool(t, e, "r1", 2, 90*time.Second)
	if names(after)[victim.Name] || !names(after)[ms[1].Name] {
		t.Errorf("after deleting %s the pool has %v", victim.Name, names(after))
	}
}

func testVanishedInstance(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	ms := waitPool(t, e, "r1", 2, 30*time.Second)
	lost := ms[1]
	pid, _ := api.ParseProviderID(lost.Spec.ProviderID)
	if _, err := e.Cloud.KillInstances(ctx, api.KillInstancesRequest{InstanceIDs: []string{pid.InstanceID}}); err != nil {
		t.Fatal(err)
	}
	// The dangling Machine and SimMachine go (without waiting on a drain), a replacement comes.
	capitest.WaitGone(t, e, &lost, 60*time.Second)
	capitest.WaitGone(t, e, &infrav1.SimMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lost.Spec.InfrastructureRef.Name}}, 30*time.Second)
	after := waitPool(t, e, "r1", 2, 90*time.Second)
	if names(after)[lost.Name] || !names(after)[ms[0].Name] {
		t.Errorf("after losing %s the pool has %v", lost.Name, names(after))
	}
	if g := group(t, e, "r1"); g.DesiredCapacity != 2 {
		t.Errorf("group desired %d", g.DesiredCapacity)
	}
}

func testScaleDown(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	newPool(t, e, "sd", 3, nil)
	ms := waitPool(t, e, "sd", 3, 90*time.Second)
	// What a cluster autoscaler does: mark the Machine it wants gone, then lower replicas.
	// The marked Machine is the oldest-but-one, not the group's own newest-first choice.
	chosen := ms[1]
	base := chosen.DeepCopy()
	chosen.Annotations = map[string]string{clusterv1.DeleteMachineAnnotation: "yes"}
	for k, v := range base.Annotations {
		chosen.Annotations[k] = v
	}
	if err := e.Client.Patch(ctx, &chosen, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	launchedBefore := e.Server.Stats().InstancesLaunchedByGroups
	setReplicas(t, e, "sd", 2)
	capitest.WaitGone(t, e, &chosen, 60*time.Second)
	after := waitPool(t, e, "sd", 2, 60*time.Second)
	if names(after)[chosen.Name] || !names(after)[ms[0].Name] || !names(after)[ms[2].Name] {
		t.Errorf("scale down removed the wrong Machine: before %v, chosen %s, after %v", names(ms), chosen.Name, names(after))
	}
	if st := instanceOf(t, e, chosen.Spec.ProviderID).State; st != api.StateTerminated && st != api.StateShuttingDown {
		t.Errorf("instance of the removed Machine is %s", st)
	}
	g := group(t, e, "sd")
	if g.DesiredCapacity != 2 || len(g.Instances) != 2 {
		t.Errorf("group desired %d members %d", g.DesiredCapacity, len(g.Instances))
	}
	if n := e.Server.Stats().InstancesLaunchedByGroups - launchedBefore; n != 0 {
		t.Errorf("scaling down launched %d instance(s)", n)
	}
	// The Machine's deletion went through the drain and the pool's hook.
	events := capitest.EventReasons(t, e, chosen.Name)
	if !slices.Contains(events, "InstanceTerminatedInGroup") || !slices.Contains(events, "SuccessfulDrainNode") {
		t.Errorf("events of %s: %v", chosen.Name, events)
	}
}

func testPaused(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	newPool(t, e, "paused", 1, func(_ *infrav1.SimMachinePool, mp *clusterv1.MachinePool) {
		mp.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	})
	mp := &clusterv1.MachinePool{}
	e.Eventually(30*time.Second, "Paused condition", func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "paused"}, mp); err != nil {
			return false, err.Error(), nil
		}
		return strings.HasPrefix(capitest.Condition(mp.Status.Conditions, clusterv1.PausedCondition), "True/"), capitest.Conds(mp.Status.Conditions), nil
	})
	time.Sleep(3 * time.Second)
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "paused"}, mp); err != nil {
		t.Fatal(err)
	}
	smp := &infrav1.SimMachinePool{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "paused"}, smp); err != nil {
		t.Fatal(err)
	}
	if len(mp.Finalizers) != 0 || len(smp.OwnerReferences) != 0 || smp.Status.GroupID != "" {
		t.Fatalf("a paused MachinePool was reconciled: finalizers %v, SimMachinePool owners %v group %q",
			mp.Finalizers, smp.OwnerReferences, smp.Status.GroupID)
	}
	base := mp.DeepCopy()
	delete(mp.Annotations, clusterv1.PausedAnnotation)
	if err := e.Client.Patch(ctx, mp, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	waitPool(t, e, "paused", 1, 90*time.Second)
}

func testPoolDeletion(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	ms := waitPool(t, e, "paused", 1, 30*time.Second)
	g := group(t, e, "paused")
	mp := &clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "paused"}}
	if err := e.Client.Delete(ctx, mp); err != nil {
		t.Fatal(err)
	}
	capitest.WaitGone(t, e, mp, 60*time.Second)
	capitest.WaitGone(t, e, &infrav1.SimMachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "paused"}}, 10*time.Second)
	capitest.WaitGone(t, e, &ms[0], 10*time.Second)
	if _, err := e.Cloud.GetScalingGroup(ctx, g.ScalingGroupID); err == nil {
		t.Errorf("scaling group %s still exists", g.ScalingGroupID)
	}
	if st := instanceOf(t, e, ms[0].Spec.ProviderID).State; st != api.StateTerminated && st != api.StateShuttingDown {
		t.Errorf("instance of the deleted pool is %s", st)
	}
	var sms infrav1.SimMachineList
	if err := e.Client.List(ctx, &sms, client.MatchingLabels{simmachinepool.PoolLabel: "paused"}); err != nil || len(sms.Items) != 0 {
		t.Errorf("SimMachines left: %d %v", len(sms.Items), err)
	}
}
