package clusterapi_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/machine"
	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/testenv"
)

func testClusterProvisioned(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	cl := &clusterv1.Cluster{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "main"}, cl); err != nil {
		t.Fatal(err)
	}
	if !isTrue(cl.Status.Conditions, clusterv1.ClusterInfrastructureReadyCondition) || cl.Status.Phase != string(clusterv1.ClusterPhaseProvisioned) {
		t.Errorf("Cluster: phase %q InfrastructureReady %s", cl.Status.Phase, condition(cl.Status.Conditions, clusterv1.ClusterInfrastructureReadyCondition))
	}
	if c := condition(cl.Status.Conditions, clusterv1.PausedCondition); !strings.HasPrefix(c, "False/") {
		t.Errorf("Cluster Paused should be False: %s", c)
	}
	var zones []string
	for _, fd := range cl.Status.FailureDomains {
		zones = append(zones, fd.Name)
	}
	if strings.Join(zones, ",") != "sim-east-1a,sim-east-1b,sim-east-1c" {
		t.Errorf("Cluster failure domains %v", zones)
	}
	sc := &infrav1.SimCluster{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "main"}, sc); err != nil {
		t.Fatal(err)
	}
	if len(sc.OwnerReferences) != 1 || sc.OwnerReferences[0].UID != cl.UID || !controllerutilHasFinalizer(sc, infrav1.SimClusterFinalizer) {
		t.Errorf("SimCluster owners %v finalizers %v", sc.OwnerReferences, sc.Finalizers)
	}
	nets, err := e.Cloud.DescribeNetworks(ctx, api.DescribeNetworksRequest{NetworkIDs: []string{sc.Status.NetworkID}})
	if err != nil || len(nets) != 1 || nets[0].ClientToken != string(sc.UID) {
		t.Errorf("network %q of the SimCluster: %+v %v", sc.Status.NetworkID, nets, err)
	}
}

func controllerutilHasFinalizer(o client.Object, f string) bool {
	for _, x := range o.GetFinalizers() {
		if x == f {
			return true
		}
	}
	return false
}

func testMachineProvisions(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	// The bootstrap config has no data yet: the Machine stays Pending, no instance is launched.
	installCRD(t, e, "testdata/testconfigs.yaml", testConfigGVK)
	cfg := &unstructured.Unstructured{}
	cfg.SetGroupVersionKind(testConfigGVK)
	cfg.SetNamespace(ns)
	cfg.SetName("m1")
	if err := e.Client.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	newMachine(t, e, "main", "m1", func(m *clusterv1.Machine) {
		m.Spec.Bootstrap = clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: testConfigGVK.Group, Kind: testConfigGVK.Kind, Name: "m1"}}
		m.Labels = map[string]string{"node-role.kubernetes.io/worker": "", "node.cluster.x-k8s.io/pool": "blue",
			"pool.node-restriction.kubernetes.io/tier": "gold", "team": "blue"}
		m.Spec.Taints = machineTaints
	})
	m := waitPhase(t, e, "m1", clusterv1.MachinePhasePending, 30*time.Second)
	if c := condition(m.Status.Conditions, clusterv1.MachineBootstrapConfigReadyCondition); !strings.HasPrefix(c, "False/") {
		t.Errorf("BootstrapConfigReady before the data: %s", c)
	}
	e.Eventually(30*time.Second, "SimMachine waits for bootstrap data", func(ctx context.Context) (bool, string, error) {
		sm, err := getSimMachine(ctx, e, "m1")
		if err != nil {
			return false, err.Error(), nil
		}
		return strings.Contains(condition(sm.Status.Conditions, infrav1.ReadyCondition), infrav1.WaitingForBootstrapDataReason),
			conds(sm.Status.Conditions), nil
	})
	sm, _ := getSimMachine(ctx, e, "m1")
	if n := len(instances(e, sm)); n != 0 {
		t.Fatalf("%d instances launched before the bootstrap data was there", n)
	}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(cfg); ref == nil || ref.Name != "m1" || cfg.GetLabels()[clusterv1.ClusterNameLabel] != "main" {
		t.Errorf("bootstrap config owners %v labels %v", cfg.GetOwnerReferences(), cfg.GetLabels())
	}
	// Play the bootstrap provider (v1beta2 contract).
	playProvider(t, e, cfg, nil, func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, true, "status", "initialization", "dataSecretCreated")
		_ = unstructured.SetNestedField(u.Object, bootstrapData, "status", "dataSecretName")
	})

	m = waitPhase(t, e, "m1", clusterv1.MachinePhaseRunning, 60*time.Second)
	if ptr.Deref(m.Spec.Bootstrap.DataSecretName, "") != bootstrapData {
		t.Errorf("spec.bootstrap.dataSecretName %v", m.Spec.Bootstrap.DataSecretName)
	}
	if !strings.HasPrefix(m.Spec.ProviderID, "sim://sim-east-1/sim-east-1b/") || m.Status.FailureDomain != "sim-east-1b" {
		t.Errorf("providerID %q failureDomain %q", m.Spec.ProviderID, m.Status.FailureDomain)
	}
	if len(m.Status.Addresses) != 3 || !ptr.Deref(m.Status.Initialization.InfrastructureProvisioned, false) ||
		!ptr.Deref(m.Status.Initialization.BootstrapDataSecretCreated, false) {
		t.Errorf("addresses %v initialization %+v", m.Status.Addresses, m.Status.Initialization)
	}
	waitMachine(t, e, "m1", "Ready", 30*time.Second, func(m *clusterv1.Machine) bool { return isTrue(m.Status.Conditions, clusterv1.ReadyCondition) })
	m, _ = getMachine(ctx, e, "m1")
	for _, c := range []string{clusterv1.MachineInfrastructureReadyCondition, clusterv1.MachineBootstrapConfigReadyCondition,
		clusterv1.MachineNodeReadyCondition, clusterv1.MachineNodeHealthyCondition} {
		if !isTrue(m.Status.Conditions, c) {
			t.Errorf("%s: %s", c, condition(m.Status.Conditions, c))
		}
	}
	if m.Labels[clusterv1.ClusterNameLabel] != "main" || !controllerutilHasFinalizer(m, clusterv1.MachineFinalizer) {
		t.Errorf("Machine labels %v finalizers %v", m.Labels, m.Finalizers)
	}
	sm, _ = getSimMachine(ctx, e, "m1")
	if ref := metav1.GetControllerOf(sm); ref == nil || ref.UID != m.UID || sm.Labels[clusterv1.ClusterNameLabel] != "main" {
		t.Errorf("SimMachine controller %v labels %v", metav1.GetControllerOf(sm), sm.Labels)
	}
	if sm.Spec.ProviderID != m.Spec.ProviderID || !ptr.Deref(sm.Status.Initialization.Provisioned, false) || sm.Status.InstanceState != "running" {
		t.Errorf("SimMachine %+v %+v", sm.Spec, sm.Status)
	}
	list, err := e.Cloud.DescribeInstances(ctx, api.DescribeInstancesRequest{Tags: map[string]string{"machina.dev/simmachine-uid": string(sm.UID)}, IncludeUserData: true})
	if err != nil || len(list) != 1 || string(list[0].UserData) != userData {
		t.Fatalf("instances %+v %v", list, err)
	}

	node := &corev1.Node{}
	if err := e.Client.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, node); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"node-role.kubernetes.io/worker": "", "node.cluster.x-k8s.io/pool": "blue",
		"pool.node-restriction.kubernetes.io/tier": "gold"} {
		if got, ok := node.Labels[k]; !ok || got != v {
			t.Errorf("Node label %s=%q (present %v), want %q", k, got, ok, v)
		}
	}
	if _, ok := node.Labels["team"]; ok {
		t.Errorf("label team must not be synced to the Node")
	}
	if node.Annotations[machine.MachineAnnotation] != "m1" || node.Annotations[machine.ClusterNameAnnotation] != "main" {
		t.Errorf("Node annotations %v", node.Annotations)
	}

	checkNodeTaints(t, e, "m1", node.Name)

	// A label dropped from the Machine disappears from the Node; others stay.
	patchMachine(t, e, "m1", func(m *clusterv1.Machine) { delete(m.Labels, "node.cluster.x-k8s.io/pool") })
	e.Eventually(30*time.Second, "label removed from the Node", func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
			return false, err.Error(), nil
		}
		_, pool := node.Labels["node.cluster.x-k8s.io/pool"]
		_, worker := node.Labels["node-role.kubernetes.io/worker"]
		return !pool && worker, fmt.Sprintf("labels %v", node.Labels), nil
	})

	if err := e.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	waitGone(t, e, m, 60*time.Second)
	if insts := instances(e, sm); len(insts) != 1 || insts[0].State != api.StateTerminated {
		t.Errorf("instance after deletion: %+v", insts)
	}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(node), &corev1.Node{}); !apierrors.IsNotFound(err) {
		t.Errorf("Node still there: %v", err)
	}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(sm), &infrav1.SimMachine{}); !apierrors.IsNotFound(err) {
		t.Errorf("SimMachine still there: %v", err)
	}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); !apierrors.IsNotFound(err) {
		t.Errorf("bootstrap config still there: %v", err)
	}
	reasons := eventReasons(t, e, "m1")
	// The story in order: linked to its Node, deleting, deleted. Happy-path phases and the
	// InfraMachine's provisioning have no event of their own, to keep writes per Machine down;
	// the Node event names the instance.
	story := []string{"SuccessfulSetNodeRef", "PhaseDeleting", "Deleted"}
	if i := indexOf(reasons, "InfrastructureProvisioned"); i >= 0 {
		t.Errorf("an event for the provisioning too: %v", reasons)
	}
	if msg := machineEventMessage(t, e, "m1", "SuccessfulSetNodeRef"); !strings.Contains(msg, "SimMachine m1, providerID sim://") {
		t.Errorf("SuccessfulSetNodeRef does not name the instance: %s", msg)
	}
	last := -1
	for _, want := range story {
		i := indexOf(reasons, want)
		if i <= last {
			t.Errorf("event %s missing or out of order: %v", want, reasons)
		}
		last = i
	}
}

// machineEventMessage returns the message of the Machine's (first) event with reason.
func machineEventMessage(t *testing.T, e *testenv.Env, name, reason string) string {
	t.Helper()
	var events corev1.EventList
	if err := e.Client.List(context.Background(), &events, client.InNamespace(ns),
		client.MatchingFields{"involvedObject.name": name, "involvedObject.kind": "Machine", "reason": reason}); err != nil {
		t.Fatal(err)
	}
	if len(events.Items) == 0 {
		return ""
	}
	return events.Items[0].Message
}

var oldMachineGVK = schema.GroupVersionKind{Group: "infrastructure.example.com", Version: "v1alpha1", Kind: "OldMachine"}

var testConfigGVK = schema.GroupVersionKind{Group: "bootstrap.example.com", Version: "v1alpha2", Kind: "TestConfig"}

// installCRD installs a test provider's CRD from testdata and waits until it is served.
func installCRD(t *testing.T, e *testenv.Env, file string, gvk schema.GroupVersionKind) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, crd); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Create(context.Background(), crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	e.Eventually(30*time.Second, gvk.Kind+" served", func(ctx context.Context) (bool, string, error) {
		u := &unstructured.UnstructuredList{}
		u.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		err := e.Client.List(ctx, u)
		return err == nil, fmt.Sprint(err), nil
	})
	// The provider's rights reach the manager by aggregation (config/rbac).
	role := lab.ProviderRole("test-provider-"+crd.Name, crd.Spec.Group, crd.Spec.Names.Plural)
	if err := e.Lab.AggregateToManager(context.Background(), role); err != nil {
		t.Fatal(err)
	}
}

func testV1Beta1Provider(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	installCRD(t, e, "testdata/oldmachines.yaml", oldMachineGVK)
	om := &unstructured.Unstructured{}
	om.SetGroupVersionKind(oldMachineGVK)
	om.SetNamespace(ns)
	om.SetName("old1")
	_ = unstructured.SetNestedField(om.Object, "big", "spec", "flavor")
	if err := e.Client.Create(ctx, om); err != nil {
		t.Fatal(err)
	}
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "old1", Namespace: ns},
		Spec: clusterv1.MachineSpec{ClusterName: "main", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To(bootstrapData)},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: oldMachineGVK.Group, Kind: "OldMachine", Name: "old1"}}}
	if err := e.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	// The Machine takes ownership and waits for status.ready.
	e.Eventually(30*time.Second, "OldMachine owned by its Machine", func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(om), om); err != nil {
			return false, err.Error(), nil
		}
		ref := metav1.GetControllerOf(om)
		return ref != nil && ref.Name == "old1" && om.GetLabels()[clusterv1.ClusterNameLabel] == "main", fmt.Sprint(om.GetOwnerReferences()), nil
	})
	m = waitPhase(t, e, "old1", clusterv1.MachinePhaseProvisioning, 30*time.Second)
	if isTrue(m.Status.Conditions, clusterv1.MachineInfrastructureReadyCondition) {
		t.Fatalf("InfrastructureReady before status.ready: %s", condition(m.Status.Conditions, clusterv1.MachineInfrastructureReadyCondition))
	}

	// Play the provider: the instance exists (spec.providerID, v1beta1 spec.failureDomain) but
	// is not ready. The Machine takes the failure domain; the providerID comes with ready, as
	// the contract has it.
	playProvider(t, e, om, func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "example://old1", "spec", "providerID")
		_ = unstructured.SetNestedField(u.Object, "zone-x", "spec", "failureDomain")
	}, nil)
	m = waitMachine(t, e, "old1", "failure domain from the OldMachine", 30*time.Second, func(m *clusterv1.Machine) bool {
		return m.Status.FailureDomain == "zone-x"
	})
	if m.Spec.ProviderID != "" || m.Status.Phase != string(clusterv1.MachinePhaseProvisioning) {
		t.Errorf("before status.ready: providerID %q phase %q; want no providerID, Provisioning", m.Spec.ProviderID, m.Status.Phase)
	}
	// The instance is ready (v1beta1: status.ready).
	playProvider(t, e, om, nil, func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, true, "status", "ready")
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": "InternalIP", "address": "10.9.8.7"}}, "status", "addresses")
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": "Ready", "status": "True", "severity": ""}}, "status", "conditions")
	})
	m = waitPhase(t, e, "old1", clusterv1.MachinePhaseProvisioned, 30*time.Second)
	if m.Spec.ProviderID != "example://old1" || m.Status.FailureDomain != "zone-x" || len(m.Status.Addresses) != 1 ||
		m.Status.Addresses[0].Address != "10.9.8.7" || !isTrue(m.Status.Conditions, clusterv1.MachineInfrastructureReadyCondition) {
		t.Errorf("copied from the v1beta1 InfraMachine: providerID %q fd %q addresses %v InfrastructureReady %s", m.Spec.ProviderID,
			m.Status.FailureDomain, m.Status.Addresses, condition(m.Status.Conditions, clusterv1.MachineInfrastructureReadyCondition))
	}

	// A terminal failure reported by the provider surfaces on the Machine.
	playProvider(t, e, om, nil, func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "CreateError", "status", "failureReason")
		_ = unstructured.SetNestedField(u.Object, "the flavor big is sold out forever", "status", "failureMessage")
	})
	m = waitPhase(t, e, "old1", clusterv1.MachinePhaseFailed, 30*time.Second)
	d := m.Status.Deprecated
	if d == nil || d.V1Beta1 == nil || string(ptr.Deref(d.V1Beta1.FailureReason, "")) != "CreateError" ||
		ptr.Deref(d.V1Beta1.FailureMessage, "") != "the flavor big is sold out forever" {
		t.Errorf("failure not surfaced: %+v", d)
	}
	if c := condition(m.Status.Conditions, clusterv1.MachineInfrastructureReadyCondition); !strings.Contains(c, "sold out") {
		t.Errorf("InfrastructureReady should carry the failure: %s", c)
	}

	if err := e.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	waitGone(t, e, m, 30*time.Second)
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(om), om); !apierrors.IsNotFound(err) {
		t.Errorf("OldMachine should be deleted with its Machine: %v", err)
	}
}

// playProvider updates an unstructured provider object's spec and status as its provider would.
func playProvider(t *testing.T, e *testenv.Env, u *unstructured.Unstructured, spec, status func(*unstructured.Unstructured)) {
	t.Helper()
	c := e.Client
	ctx := context.Background()
	if err := c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
		t.Fatal(err)
	}
	if spec != nil {
		base := u.DeepCopy()
		spec(u)
		if err := c.Patch(ctx, u, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
	}
	if status != nil {
		base := u.DeepCopy()
		status(u)
		if err := c.Status().Patch(ctx, u, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
	}
}
