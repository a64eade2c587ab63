package clusterapi_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/api"
)

// testAdopt: a SimMachine whose spec.providerID names an existing instance (launched by
// someone else, as the Machine API actuator does before a migration) adopts it and never
// launches another.
func testAdopt(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	resp, err := e.Cloud.RunInstances(ctx, api.RunInstancesRequest{ClientToken: "adopt-me", Region: "sim-east-1",
		Zone: "sim-east-1c", InstanceType: "s1.small", Image: "sim-rhcos-9", Tags: map[string]string{"machina.dev/api": "machine.openshift.io"}})
	if err != nil {
		t.Fatal(err)
	}
	before, err := e.Cloud.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sm := &infrav1.SimMachine{ObjectMeta: metav1.ObjectMeta{Name: "adopted", Namespace: ns},
		Spec: infrav1.SimMachineSpec{ProviderID: resp.Instance.ProviderID,
			InstanceSpec: infrav1.InstanceSpec{InstanceType: "s1.small", Image: "sim-rhcos-9"}}}
	if err := e.Client.Create(ctx, sm); err != nil {
		t.Fatal(err)
	}
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "adopted", Namespace: ns},
		Spec: clusterv1.MachineSpec{ClusterName: "main", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To(bootstrapData)},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "SimMachine", Name: "adopted"}}}
	if err := e.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	m = waitPhase(t, e, "adopted", clusterv1.MachinePhaseRunning, 60*time.Second)
	if m.Spec.ProviderID != resp.Instance.ProviderID || m.Status.FailureDomain != "sim-east-1c" {
		t.Errorf("adopted Machine: providerID %q (want %q) failureDomain %q", m.Spec.ProviderID, resp.Instance.ProviderID, m.Status.FailureDomain)
	}
	after, err := e.Cloud.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.InstancesCreated != before.InstancesCreated {
		t.Errorf("%d instance(s) launched while adopting", after.InstancesCreated-before.InstancesCreated)
	}
	sm, _ = getSimMachine(ctx, e, "adopted")
	if n := len(instances(e, sm)); n != 0 {
		t.Errorf("%d instance(s) launched with the SimMachine's token", n)
	}
	// Deleting the Machine terminates the adopted instance: it is Cluster API's now.
	if err := e.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	waitGone(t, e, m, 60*time.Second)
	inst, err := e.Cloud.GetInstance(ctx, resp.Instance.InstanceID)
	if err == nil && inst.State.Alive() {
		t.Errorf("adopted instance still %s after its Machine was deleted", inst.State)
	}
}

// testDrainTimeoutAndExclusion: a drain blocked by a PodDisruptionBudget is given up after
// spec.deletion.nodeDrainTimeoutSeconds, and skipped altogether with the exclude annotation.
func testDrainTimeoutAndExclusion(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	newMachine(t, e, "main", "drain-timeout", func(m *clusterv1.Machine) {
		m.Spec.Deletion.NodeDrainTimeoutSeconds = ptr.To[int32](3)
	})
	newMachine(t, e, "main", "drain-excluded", func(m *clusterv1.Machine) {
		m.Annotations = map[string]string{clusterv1.ExcludeNodeDrainingAnnotation: ""}
	})
	app := map[string]string{"app": "guarded"}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)), Selector: &metav1.LabelSelector{MatchLabels: app}}}
	if err := e.Client.Create(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	var machines []*clusterv1.Machine
	for _, name := range []string{"drain-timeout", "drain-excluded"} {
		m := waitPhase(t, e, name, clusterv1.MachinePhaseRunning, 60*time.Second)
		machines = append(machines, m)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name + "-pod", Namespace: ns, Labels: app},
			Spec: corev1.PodSpec{NodeName: m.Status.NodeRef.Name, Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/app"}}}}
		if err := e.Client.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	e.Eventually(60*time.Second, "PDB computed", func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(pdb), pdb); err != nil {
			return false, err.Error(), nil
		}
		return pdb.Status.ExpectedPods == 2 && pdb.Status.CurrentHealthy == 2, fmt.Sprintf("%+v", pdb.Status), nil
	})
	for _, m := range machines {
		if err := e.Client.Delete(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	// The PDB refuses every eviction; both Machines still go.
	for _, m := range machines {
		waitGone(t, e, m, 60*time.Second)
	}
	timeoutEvents := eventReasons(t, e, "drain-timeout")
	if indexOf(timeoutEvents, "DrainBlocked") < 0 || indexOf(timeoutEvents, "DrainTimeout") < indexOf(timeoutEvents, "DrainBlocked") {
		t.Errorf("drain-timeout should have been blocked, then timed out: %v", timeoutEvents)
	}
	if excluded := eventReasons(t, e, "drain-excluded"); indexOf(excluded, "DrainBlocked") >= 0 || indexOf(excluded, "SuccessfulDrainNode") >= 0 {
		t.Errorf("drain-excluded was drained: %v", excluded)
	}
	_ = e.Client.Delete(ctx, pdb)
}

// testInvalidAndOutage: the cloud refusing the SimMachine's spec is terminal for the
// SimMachine (and reported on the Machine); an outage is retried until it passes.
func testInvalidAndOutage(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	sm := &infrav1.SimMachine{ObjectMeta: metav1.ObjectMeta{Name: "bad-type", Namespace: ns},
		Spec: infrav1.SimMachineSpec{InstanceSpec: infrav1.InstanceSpec{InstanceType: "x9.huge", Image: "sim-rhcos-9"}}}
	if err := e.Client.Create(ctx, sm); err != nil {
		t.Fatal(err)
	}
	bad := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "bad-type", Namespace: ns},
		Spec: clusterv1.MachineSpec{ClusterName: "main", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To(bootstrapData)},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "SimMachine", Name: "bad-type"}}}
	if err := e.Client.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	waitMachine(t, e, "bad-type", "InfrastructureReady reports the invalid spec", 30*time.Second, func(m *clusterv1.Machine) bool {
		c := condition(m.Status.Conditions, clusterv1.MachineInfrastructureReadyCondition)
		return strings.HasPrefix(c, "False/"+infrav1.InvalidConfigurationReason) && strings.Contains(c, "instanceType")
	})
	stats, _ := e.Cloud.Stats(ctx)
	calls := stats.Operations[api.OpRunInstances].Calls
	time.Sleep(3 * time.Second) // resyncs must not retry a terminal failure
	stats, _ = e.Cloud.Stats(ctx)
	if n := stats.Operations[api.OpRunInstances].Calls - calls; n != 0 {
		t.Errorf("%d RunInstances calls after a terminal failure", n)
	}
	if m, _ := getMachine(ctx, e, "bad-type"); m.Status.Phase != string(clusterv1.MachinePhaseProvisioning) {
		t.Errorf("phase %q, want Provisioning (the v1beta2 contract has no terminal Machine failure)", m.Status.Phase)
	}

	f, err := e.Cloud.CreateFault(ctx, api.Fault{Kind: api.FaultError, Operation: api.OpRunInstances, StatusCode: 503})
	if err != nil {
		t.Fatal(err)
	}
	newMachine(t, e, "main", "outage", nil)
	e.Eventually(30*time.Second, "outage reported", func(ctx context.Context) (bool, string, error) {
		sm, err := getSimMachine(ctx, e, "outage")
		if err != nil {
			return false, err.Error(), nil
		}
		c := condition(sm.Status.Conditions, infrav1.ReadyCondition)
		return strings.HasPrefix(c, "False/"+infrav1.CloudErrorReason), c, nil
	})
	if _, err := e.Cloud.DeleteFaults(ctx, f.FaultID); err != nil {
		t.Fatal(err)
	}
	m := waitPhase(t, e, "outage", clusterv1.MachinePhaseRunning, 60*time.Second)
	for _, o := range []*clusterv1.Machine{bad, m} {
		if err := e.Client.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitGone(t, e, bad, 30*time.Second)
	waitGone(t, e, m, 60*time.Second)
}
