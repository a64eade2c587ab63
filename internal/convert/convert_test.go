package convert_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	mapiv1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	simv1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/convert"
	ct "github.com/machina-dev/machina/internal/convert/converttest"
	"github.com/machina-dev/machina/internal/convert/providers/sim"
)

const cluster = "lab-7x2kq"

var ctx = convert.Context{ClusterName: cluster, Platform: sim.Platform{Region: "sim-east-1"}, Namespaces: convert.OpenShiftNamespaces}

func providerSpec() *runtime.RawExtension {
	return &runtime.RawExtension{Raw: []byte(`{"apiVersion":"infrastructure.machina.dev/v1alpha1","kind":"SimMachineProviderSpec","region":"sim-east-1","zone":"sim-east-1a","instanceType":"s1.large","image":"sim-rhcos-9","userDataSecret":{"name":"worker-user-data"}}`)}
}

func mapiMachine() *mapiv1.Machine {
	return &mapiv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "openshift-machine-api", Labels: map[string]string{convert.MachineAPIClusterLabel: cluster}},
		Spec:       mapiv1.MachineSpec{ProviderSpec: mapiv1.ProviderSpec{Value: providerSpec()}},
	}
}

func toCAPI(t *testing.T, m *mapiv1.Machine) (*convert.ClusterAPIMachine, convert.Warnings, field.ErrorList) {
	t.Helper()
	return convert.ToClusterAPIMachine(m, ctx)
}

// paths returns "field: type" for each error, the part tests pin down exactly.
func paths(errs field.ErrorList) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Field + ": " + string(e.Type)
	}
	return out
}

func equalStrings(a, b []string) bool { return strings.Join(a, "\n") == strings.Join(b, "\n") }

func TestMachineGenericFieldsToClusterAPI(t *testing.T) {
	m := mapiMachine()
	m.Annotations = map[string]string{
		convert.MachineAPIDeleteMachineAnnotation:       "yes",
		convert.MachineAPIExcludeNodeDrainingAnnotation: "",
		"example.com/keep":                              "v",
	}
	m.Spec.LifecycleHooks = mapiv1.LifecycleHooks{
		PreDrain:     []mapiv1.LifecycleHook{{Name: "drain-later", Owner: "me"}},
		PreTerminate: []mapiv1.LifecycleHook{{Name: "backup", Owner: "backup-controller"}},
	}
	m.Spec.ObjectMeta.Labels = map[string]string{"node-role.kubernetes.io/worker": ""}
	m.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	m.Spec.ProviderID = ptr.To("sim://sim-east-1/sim-east-1a/i-1")

	got, w, errs := toCAPI(t, m)
	if len(errs) > 0 || len(w) > 0 {
		t.Fatalf("errors %v, warnings %v", errs, w)
	}
	cm := got.Machine
	wantAnn := map[string]string{
		clusterv1.DeleteMachineAnnotation:                            "yes",
		clusterv1.ExcludeNodeDrainingAnnotation:                      "",
		"example.com/keep":                                           "v",
		"pre-drain.delete.hook.machine.cluster.x-k8s.io/drain-later": "me",
		"pre-terminate.delete.hook.machine.cluster.x-k8s.io/backup":  "backup-controller",
	}
	if !equality.Semantic.DeepEqual(cm.Annotations, wantAnn) {
		t.Errorf("annotations %v, want %v", cm.Annotations, wantAnn)
	}
	wantLabels := map[string]string{convert.MachineAPIClusterLabel: cluster, clusterv1.ClusterNameLabel: cluster, "node-role.kubernetes.io/worker": ""}
	if !equality.Semantic.DeepEqual(cm.Labels, wantLabels) {
		t.Errorf("labels %v, want %v", cm.Labels, wantLabels)
	}
	if cm.Namespace != "openshift-cluster-api" || cm.Spec.ClusterName != cluster || cm.Spec.FailureDomain != "sim-east-1a" ||
		ptr.Deref(cm.Spec.Bootstrap.DataSecretName, "") != "worker-user-data" || cm.Spec.ProviderID != "sim://sim-east-1/sim-east-1a/i-1" {
		t.Errorf("unexpected machine: %+v", cm)
	}
	if len(cm.Spec.Taints) != 1 || cm.Spec.Taints[0].Propagation != clusterv1.MachineTaintPropagationAlways {
		t.Errorf("taints %+v", cm.Spec.Taints)
	}
	sm := got.InfraMachine.(*simv1.SimMachine)
	if sm.Name != "m" || sm.Spec.ProviderID != cm.Spec.ProviderID || sm.Spec.Zone != "" || sm.Spec.InstanceType != "s1.large" {
		t.Errorf("unexpected SimMachine %+v", sm)
	}
	if cm.Spec.InfrastructureRef != (clusterv1.ContractVersionedObjectReference{APIGroup: simv1.GroupVersion.Group, Kind: "SimMachine", Name: "m"}) {
		t.Errorf("infrastructureRef %+v", cm.Spec.InfrastructureRef)
	}
}

func TestMachineErrorsToClusterAPI(t *testing.T) {
	m := mapiMachine()
	m.Namespace = "openshift-cluster-api"
	m.Labels[convert.MachineAPIClusterLabel] = "other-cluster"
	m.Annotations = map[string]string{"pre-drain.delete.hook.machine.cluster.x-k8s.io/sneaky": "x"}
	m.Spec.LifecycleHooks.PreDrain = []mapiv1.LifecycleHook{{Name: "not a valid name", Owner: "o"}, {Name: "ok", Owner: ""}, {Name: "dup", Owner: "a"}, {Name: "dup", Owner: "b"}}
	m.Spec.ObjectMeta.Labels = map[string]string{"team": "a"}
	m.Spec.ObjectMeta.Annotations = map[string]string{"a": "b"}
	m.Spec.Taints = []corev1.Taint{{Key: "k"}, {Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute}}
	m.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: []byte(`{"apiVersion":"infrastructure.machina.dev/v1alpha1","kind":"SimMachineProviderSpec","region":"sim-west-9","zone":"z","instanceType":"","image":"i"}`)}

	got, _, errs := toCAPI(t, m)
	if got != nil {
		t.Errorf("result returned with errors")
	}
	want := []string{
		"metadata.annotations[pre-drain.delete.hook.machine.cluster.x-k8s.io/sneaky]: FieldValueInvalid",
		"metadata.labels[machine.openshift.io/cluster-api-cluster]: FieldValueInvalid",
		"metadata.namespace: FieldValueInvalid",
		"spec.lifecycleHooks.preDrain[0].name: FieldValueInvalid",
		"spec.lifecycleHooks.preDrain[1].owner: FieldValueRequired",
		"spec.lifecycleHooks.preDrain[3].name: FieldValueDuplicate",
		"spec.metadata.annotations: FieldValueInvalid",
		"spec.metadata.labels[team]: FieldValueInvalid",
		"spec.providerSpec.value.instanceType: FieldValueRequired",
		"spec.providerSpec.value.region: FieldValueInvalid",
		"spec.providerSpec.value.userDataSecret: FieldValueRequired",
		"spec.taints[0].effect: FieldValueRequired",
		"spec.taints[1].key: FieldValueInvalid",
	}
	if !equalStrings(paths(errs), want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(paths(errs), "\n"), strings.Join(want, "\n"))
	}
	for _, e := range errs {
		if e.Field == "spec.providerSpec.value.region" && !strings.Contains(e.Detail, "region is sim-east-1") {
			t.Errorf("region error does not say the cluster's region: %v", e)
		}
	}
}

func TestDeprecatedDeleteAnnotationWarns(t *testing.T) {
	m := mapiMachine()
	m.Annotations = map[string]string{convert.MachineAPIDeleteMachineAnnotationDeprecated: "true"}
	got, w, errs := toCAPI(t, m)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if got.Machine.Annotations[clusterv1.DeleteMachineAnnotation] != "true" || len(w) != 1 || !strings.Contains(w[0].String(), "deprecated") {
		t.Errorf("annotations %v warnings %v", got.Machine.Annotations, w)
	}
}

func capiPair(t *testing.T) (*clusterv1.Machine, *simv1.SimMachine) {
	got, _, errs := toCAPI(t, mapiMachine())
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return got.Machine, got.InfraMachine.(*simv1.SimMachine)
}

func TestMachineErrorsToMachineAPI(t *testing.T) {
	m, sm := capiPair(t)
	m.Namespace = "openshift-machine-api"
	m.Spec.ClusterName = "other"
	m.Spec.Version = "v1.33.0"
	m.Spec.MinReadySeconds = ptr.To[int32](5)
	m.Spec.ReadinessGates = []clusterv1.MachineReadinessGate{{ConditionType: "Foo"}}
	m.Spec.Deletion = clusterv1.MachineDeletionSpec{NodeDrainTimeoutSeconds: ptr.To[int32](60), NodeVolumeDetachTimeoutSeconds: ptr.To[int32](60), NodeDeletionTimeoutSeconds: ptr.To[int32](30)}
	m.Spec.Bootstrap = clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfig", Name: "m"}}
	m.Spec.Taints = []clusterv1.MachineTaint{{Key: "k", Effect: corev1.TaintEffectNoSchedule, Propagation: clusterv1.MachineTaintPropagationOnInitialization}}
	m.Spec.ProviderID = "sim://a"
	m.Annotations = map[string]string{"pre-drain.delete.hook.machine.cluster.x-k8s.io": "owner", "pre-terminate.delete.hook.machine.cluster.x-k8s.io/x": ""}
	sm.Spec.ProviderID = "sim://b"
	sm.Spec.Zone = "sim-east-1c"

	got, _, errs := convert.ToMachineAPIMachine(m, sm, ctx)
	if got != nil {
		t.Errorf("result returned with errors")
	}
	want := []string{
		"Machine.metadata.annotations[pre-drain.delete.hook.machine.cluster.x-k8s.io]: FieldValueInvalid",
		"Machine.metadata.annotations[pre-terminate.delete.hook.machine.cluster.x-k8s.io/x]: FieldValueInvalid",
		"Machine.metadata.namespace: FieldValueInvalid",
		"Machine.spec.bootstrap.configRef: FieldValueInvalid",
		"Machine.spec.clusterName: FieldValueInvalid",
		"Machine.spec.deletion.nodeDeletionTimeoutSeconds: FieldValueInvalid",
		"Machine.spec.deletion.nodeDrainTimeoutSeconds: FieldValueInvalid",
		"Machine.spec.deletion.nodeVolumeDetachTimeoutSeconds: FieldValueInvalid",
		"Machine.spec.minReadySeconds: FieldValueInvalid",
		"Machine.spec.readinessGates[0]: FieldValueInvalid",
		"Machine.spec.taints[0].propagation: FieldValueNotSupported",
		"Machine.spec.version: FieldValueInvalid",
		"SimMachine.spec.providerID: FieldValueInvalid",
		"SimMachine.spec.zone: FieldValueInvalid",
	}
	if !equalStrings(paths(errs), want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(paths(errs), "\n"), strings.Join(want, "\n"))
	}

	// Without its InfraMachine, or with the wrong kind, a Machine cannot be converted.
	m2, _ := capiPair(t)
	if _, _, errs := convert.ToMachineAPIMachine(m2, nil, ctx); !equalStrings(paths(errs), []string{"Machine.spec.infrastructureRef: FieldValueInvalid"}) {
		t.Errorf("missing infra: %v", errs)
	}
	if _, _, errs := convert.ToMachineAPIMachine(m2, &simv1.SimMachineTemplate{}, ctx); len(errs) != 1 {
		t.Errorf("wrong infra kind: %v", errs)
	}
	var nilSim *simv1.SimMachine
	if _, _, errs := convert.ToMachineAPIMachine(m2, nilSim, ctx); len(errs) != 1 {
		t.Errorf("typed nil infra: %v", errs)
	}
}

func TestNilInputsAndEmptyContext(t *testing.T) {
	if _, _, errs := convert.ToClusterAPIMachine(nil, ctx); len(errs) == 0 {
		t.Error("nil Machine accepted")
	}
	if _, _, errs := convert.ToClusterAPIMachineSet(mapiv1ms(), convert.Context{}); len(errs) != 2 {
		t.Errorf("empty context: %v", errs)
	}
	if _, _, errs := convert.ToMachineAPIMachineSet(nil, nil, ctx); len(errs) == 0 {
		t.Error("nil MachineSet accepted")
	}
	if _, _, errs := convert.ToClusterAPIMachineHealthCheck(nil, ctx); len(errs) == 0 {
		t.Error("nil MHC accepted")
	}
	if _, _, errs := convert.ToMachineAPIMachineHealthCheck(&clusterv1.MachineHealthCheck{}, convert.Context{}); len(errs) == 0 {
		t.Error("MHC without cluster name accepted")
	}
}

func mapiv1ms() *mapiv1.MachineSet {
	ms := &mapiv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "ms", Namespace: "openshift-machine-api"}}
	ms.Spec.Template.Spec.ProviderSpec.Value = providerSpec()
	return ms
}

func TestScaleFromZeroAnnotations(t *testing.T) {
	ms := mapiv1ms()
	ms.Annotations = map[string]string{
		convert.MachineAPICPUAnnotation:               "8",
		convert.MachineAPIMemoryAnnotation:            "32768",
		convert.MachineAPIGPUAnnotation:               "1",
		convert.MachineAPIMaxPodsAnnotation:           "250",
		convert.CapacityLabelsAnnotation:              "kubernetes.io/arch=arm64",
		convert.MachineAPIAutoscalerMinSizeAnnotation: "0",
		convert.MachineAPIAutoscalerMaxSizeAnnotation: "10",
	}
	got, w, errs := convert.ToClusterAPIMachineSet(ms, ctx)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	want := map[string]string{
		convert.CapacityCPUAnnotation:         "8",
		convert.CapacityMemoryAnnotation:      "32768Mi",
		convert.CapacityGPUCountAnnotation:    "1",
		convert.CapacityGPUTypeAnnotation:     "nvidia.com/gpu",
		convert.CapacityMaxPodsAnnotation:     "250",
		convert.CapacityLabelsAnnotation:      "kubernetes.io/arch=arm64",
		clusterv1.AutoscalerMinSizeAnnotation: "0",
		clusterv1.AutoscalerMaxSizeAnnotation: "10",
	}
	if !equality.Semantic.DeepEqual(got.MachineSet.Annotations, want) {
		t.Errorf("annotations %v\nwant %v", got.MachineSet.Annotations, want)
	}
	// Two warnings: the MachineSet and its template have no cluster label and get one.
	if len(w) != 2 {
		t.Errorf("warnings: %v", w.Strings())
	}
	back, _, errs := convert.ToMachineAPIMachineSet(got.MachineSet, got.InfraMachineTemplate, ctx)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if !equality.Semantic.DeepEqual(back.Annotations, ms.Annotations) {
		t.Errorf("back: %v\nwant %v", back.Annotations, ms.Annotations)
	}

	// A quantity that is not in canonical form converts, with a warning that it is rewritten.
	got.MachineSet.Annotations[convert.CapacityMemoryAnnotation] = "32Gi"
	back, w, _ = convert.ToMachineAPIMachineSet(got.MachineSet, got.InfraMachineTemplate, ctx)
	if back.Annotations[convert.MachineAPIMemoryAnnotation] != "32768" || !strings.Contains(strings.Join(w.Strings(), "\n"), "32768Mi") {
		t.Errorf("32Gi: %v %v", back.Annotations, w)
	}
}

func TestTemplateName(t *testing.T) {
	a := &simv1.SimMachineSpec{InstanceSpec: simv1.InstanceSpec{InstanceType: "s1.large", Image: "img"}}
	b := &simv1.SimMachineSpec{InstanceSpec: simv1.InstanceSpec{InstanceType: "s1.xlarge", Image: "img"}}
	n1, _ := convert.TemplateName("workers", a)
	n2, _ := convert.TemplateName("workers", b)
	n3, _ := convert.TemplateName("workers", a.DeepCopy())
	if n1 == n2 || n1 != n3 || !strings.HasPrefix(n1, "workers-") || len(n1) != len("workers-")+10 {
		t.Errorf("names %q %q %q", n1, n2, n3)
	}
	long := strings.Repeat("a", 50) + "-" + strings.Repeat("b", 40)
	l1, _ := convert.TemplateName(long, a)
	l2, _ := convert.TemplateName(long+"x", a)
	if len(l1) > 63 || len(l2) > 63 || l1 == l2 || !strings.HasPrefix(l1, long[:50]) {
		t.Errorf("long names %q (%d) %q", l1, len(l1), l2)
	}
	dash, _ := convert.TemplateName(strings.Repeat("a", 51)+"-bbbbbbbb", a)
	if strings.Contains(dash, "--") || len(dash) > 63 {
		t.Errorf("truncation left a dangling dash: %q", dash)
	}
	// Reverting a change to the providerSpec yields the original template name.
	ms := mapiv1ms()
	c1, _, _ := convert.ToClusterAPIMachineSet(ms, ctx)
	ms.Spec.Template.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: []byte(strings.Replace(string(providerSpec().Raw), "s1.large", "s1.xlarge", 1))}
	c2, _, _ := convert.ToClusterAPIMachineSet(ms, ctx)
	ms.Spec.Template.Spec.ProviderSpec.Value = providerSpec()
	c3, _, _ := convert.ToClusterAPIMachineSet(ms, ctx)
	if c1.InfraMachineTemplate.GetName() == c2.InfraMachineTemplate.GetName() || c1.InfraMachineTemplate.GetName() != c3.InfraMachineTemplate.GetName() {
		t.Errorf("template names %s %s %s", c1.InfraMachineTemplate.GetName(), c2.InfraMachineTemplate.GetName(), c3.InfraMachineTemplate.GetName())
	}
	if c1.MachineSet.Spec.Template.Spec.InfrastructureRef.Name != c1.InfraMachineTemplate.GetName() {
		t.Error("infrastructureRef does not name the template")
	}
}

func TestMachineHealthCheckRoundTrip(t *testing.T) {
	// Without namespace mapping: with it, a remediation template reference carries a
	// warning that the template must exist in the Cluster API namespace too.
	ctx := ctx
	ctx.Namespaces = convert.Namespaces{}
	for seed := int64(0); seed < 2000 && !t.Failed(); seed++ {
		g := ct.New(seed)
		in := g.MAPIMachineHealthCheck(ctx)
		capi, w, errs := convert.ToClusterAPIMachineHealthCheck(in, ctx)
		if len(errs) > 0 || len(w) > 0 {
			t.Fatalf("to Cluster API: %v %v\n%s", errs, w, js(in))
		}
		back, w, errs := convert.ToMachineAPIMachineHealthCheck(capi, ctx)
		if len(errs) > 0 || len(w) > 0 {
			t.Fatalf("back: %v %v", errs, w)
		}
		if !equality.Semantic.DeepEqual(in, back) {
			t.Fatalf("round trip changed the MHC\nin:   %s\nback: %s", js(in), js(back))
		}

		cin := g.CAPIMachineHealthCheck(ctx)
		mapi, w, errs := convert.ToMachineAPIMachineHealthCheck(cin, ctx)
		if len(errs) > 0 || len(w) > 0 {
			t.Fatalf("to Machine API: %v %v\n%s", errs, w, js(cin))
		}
		cback, w, errs := convert.ToClusterAPIMachineHealthCheck(mapi, ctx)
		if len(errs) > 0 || len(w) > 0 {
			t.Fatalf("back: %v %v", errs, w)
		}
		if !equality.Semantic.DeepEqual(cin, cback) {
			t.Fatalf("round trip changed the MHC\nin:   %s\nback: %s", js(cin), js(cback))
		}
	}
}

func TestMachineHealthCheckLossy(t *testing.T) {
	in := &mapiv1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "openshift-machine-api"}}
	in.Spec.UnhealthyConditions = []mapiv1.UnhealthyCondition{{Type: "Ready", Status: "False", Timeout: metav1.Duration{Duration: -1}}}
	in.Spec.RemediationTemplate = &corev1.ObjectReference{Kind: "K", Name: "n", Namespace: "elsewhere"}
	_, _, errs := convert.ToClusterAPIMachineHealthCheck(in, ctx)
	if !equalStrings(paths(errs), []string{"spec.remediationTemplate.namespace: FieldValueInvalid", "spec.unhealthyConditions[0].timeout: FieldValueInvalid"}) {
		t.Errorf("errors %v", errs)
	}
	in.Spec.UnhealthyConditions[0].Timeout.Duration = 1500 * time.Millisecond
	in.Spec.RemediationTemplate.Namespace = ""
	out, w, errs := convert.ToClusterAPIMachineHealthCheck(in, ctx)
	if len(errs) > 0 || *out.Spec.Checks.UnhealthyNodeConditions[0].TimeoutSeconds != 2 {
		t.Fatalf("errors %v", errs)
	}
	want := []string{
		"spec.remediationTemplate: the template must also exist in namespace openshift-cluster-api",
		"spec.unhealthyConditions[0].timeout: 1.5s rounded up to 2s: the Cluster API counts whole seconds",
	}
	if !equalStrings(w.Strings(), want) {
		t.Errorf("warnings %v", w.Strings())
	}
}

// A Cluster API-owned check's features the Machine API has no field for are left out of its
// Machine API copy with a warning each; the rest converts, and the input is not changed.
func TestMachineHealthCheckWithoutClusterAPIOnly(t *testing.T) {
	in := &clusterv1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "openshift-cluster-api"}}
	in.Spec.ClusterName = ctx.ClusterName
	in.Spec.Checks.UnhealthyNodeConditions = []clusterv1.UnhealthyNodeCondition{{Type: "Ready", Status: "False", TimeoutSeconds: ptr.To[int32](60)}}
	in.Spec.Checks.UnhealthyMachineConditions = []clusterv1.UnhealthyMachineCondition{{Type: "Ready", Status: "False", TimeoutSeconds: ptr.To[int32](60)}}
	in.Spec.Remediation.TriggerIf.UnhealthyInRange = "[1-3]"
	if _, _, errs := convert.ToMachineAPIMachineHealthCheck(in, ctx); len(errs) != 2 {
		t.Fatalf("whole conversion: want the two features refused, got %v", errs)
	}
	part, w := convert.WithoutClusterAPIOnly(in)
	want := []string{
		"MachineHealthCheck.spec.checks.unhealthyMachineConditions[0]: Ready is not carried to the Machine API copy: it has no equivalent in the Machine API (it checks Node conditions only)",
		"MachineHealthCheck.spec.remediation.triggerIf.unhealthyInRange: [1-3] is not carried to the Machine API copy: it has no equivalent in the Machine API (only maxUnhealthy)",
	}
	if !equalStrings(w.Strings(), want) {
		t.Errorf("warnings %q", w.Strings())
	}
	if len(in.Spec.Checks.UnhealthyMachineConditions) != 1 || in.Spec.Remediation.TriggerIf.UnhealthyInRange == "" {
		t.Error("the input was changed")
	}
	out, _, errs := convert.ToMachineAPIMachineHealthCheck(part, ctx)
	if len(errs) > 0 || len(out.Spec.UnhealthyConditions) != 1 {
		t.Fatalf("the rest does not convert: %v %+v", errs, out)
	}
	if same, w := convert.WithoutClusterAPIOnly(part); same != part || w != nil {
		t.Errorf("a check without such features changed: %v", w)
	}
}

func js(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}
