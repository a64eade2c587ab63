package sim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/controllers/machineapi"
	"github.com/machina-dev/machina/internal/controllers/scalefromzero"
	"github.com/machina-dev/machina/internal/controllers/sim"
	"github.com/machina-dev/machina/internal/controllers/sim/simmachinetemplate"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/testenv"
)

const ns = "default"

// catalogueFile adds an instance type and an image to the built-in catalogue, the way an
// operator would with `machina cloud --catalogue`.
const catalogueFile = `
instanceTypes:
- name: x1.custom
  vcpu: 12
  memoryMiB: 24576
  gpu: 2
  gpuResource: amd.com/gpu
  architecture: arm64
  maxPods: 250
  ephemeralStorageGiB: 200
images:
- imageID: sim-windows-2025
  operatingSystem: windows
`

var env *testenv.Env

// TestSim runs the sim group's lab tests, in one lab: scale from zero, and what the simulated
// Machine API actuator records (simactuator_test.go).
func TestSim(t *testing.T) {
	file := filepath.Join(t.TempDir(), "catalogue.yaml")
	if err := os.WriteFile(file, []byte(catalogueFile), 0o600); err != nil {
		t.Fatal(err)
	}
	env = testenv.Start(t, testenv.Options{Groups: machineapi.GroupName + "," + sim.GroupName, CatalogueFile: file})
	t.Run("ScaleFromZero", func(t *testing.T) {
		t.Run("MachineSetAnnotationsFollowInstanceType", testMachineSetFollows)
		t.Run("MachineSetUnknownInstanceType", testMachineSetUnknown)
		t.Run("MachineSetCatalogueFileInstanceType", testMachineSetCatalogueFile)
		t.Run("MachineSetClusterAPIAuthoritativeLeftAlone", testMachineSetClusterAPIAuthority)
		t.Run("MachineSetOtherProviderIgnored", testMachineSetOtherProvider)
		t.Run("MachineSetCloudOutageKeepsAnnotations", testMachineSetOutage)
		t.Run("TemplateReportsCapacityAndFollows", testTemplateFollows)
		t.Run("TemplatePaused", testTemplatePaused)
	})
	t.Run("MachineAPIActuatorRecordsInstance", testActuatorRecordsInstance)
}

// --- Machine API ---

func providerSpec(instanceType string) *runtime.RawExtension {
	ps := &infrav1.SimMachineProviderSpec{
		TypeMeta: metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: "SimMachineProviderSpec"},
		Region:   "sim-east-1", Zone: "sim-east-1a", InstanceType: instanceType, Image: "sim-rhcos-9",
	}
	raw, _ := json.Marshal(ps)
	return &runtime.RawExtension{Raw: raw}
}

func newMachineSet(name string, ps *runtime.RawExtension) *machinev1beta1.MachineSet {
	labels := map[string]string{"machineset": name}
	return &machinev1beta1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: machinev1beta1.MachineSetSpec{
			Replicas: ptr.To[int32](0),
			Selector: metav1.LabelSelector{MatchLabels: labels},
			Template: machinev1beta1.MachineTemplateSpec{
				ObjectMeta: machinev1beta1.ObjectMeta{Labels: labels},
				Spec:       machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: ps}},
			},
		},
	}
}

func getMachineSet(ctx context.Context, e *testenv.Env, name string) (*machinev1beta1.MachineSet, error) {
	ms := &machinev1beta1.MachineSet{}
	return ms, e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ms)
}

// capacityAnnotations are the annotations the controller owns, as they are now.
func capacityAnnotations(ms *machinev1beta1.MachineSet) map[string]string {
	out := map[string]string{}
	for _, k := range []string{scalefromzero.CPUAnnotation, scalefromzero.MemoryAnnotation, scalefromzero.GPUAnnotation, scalefromzero.LabelsAnnotation} {
		if v, ok := ms.Annotations[k]; ok {
			out[k] = v
		}
	}
	return out
}

func describe(m map[string]string) string {
	b, _ := json.Marshal(m)
	return string(b)
}

func mapiCondition(ms *machinev1beta1.MachineSet) string {
	c := mapicond.Get(ms.Status.Conditions, scalefromzero.CapacityAnnotatedCondition)
	if c == nil {
		return "<none>"
	}
	return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
}

// waitAnnotations waits until the MachineSet's capacity annotations are exactly want and
// CapacityAnnotated has the given status.
func waitAnnotations(t *testing.T, e *testenv.Env, name string, want map[string]string, cond corev1.ConditionStatus) *machinev1beta1.MachineSet {
	t.Helper()
	var ms *machinev1beta1.MachineSet
	e.Eventually(30*time.Second, name+": annotations "+describe(want), func(ctx context.Context) (bool, string, error) {
		var err error
		if ms, err = getMachineSet(ctx, e, name); err != nil {
			return false, err.Error(), nil
		}
		got := capacityAnnotations(ms)
		c := mapicond.Get(ms.Status.Conditions, scalefromzero.CapacityAnnotatedCondition)
		return describe(got) == describe(want) && c != nil && c.Status == cond,
			describe(got) + " condition " + mapiCondition(ms), nil
	})
	return ms
}

// updateMachineSet applies mutate to the latest MachineSet, retrying on conflicts with the
// controllers writing it concurrently; status selects the status subresource.
func updateMachineSet(t *testing.T, e *testenv.Env, name string, status bool, mutate func(*machinev1beta1.MachineSet)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ms, err := getMachineSet(context.Background(), e, name)
		if err != nil {
			return err
		}
		mutate(ms)
		if status {
			// A mirror's status is machina's to write (config/admission/authority-status.yaml).
			return e.ManagerClient().Status().Update(context.Background(), ms)
		}
		return e.Client.Update(context.Background(), ms)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func setInstanceType(t *testing.T, e *testenv.Env, name, instanceType string) {
	t.Helper()
	updateMachineSet(t, e, name, false, func(ms *machinev1beta1.MachineSet) {
		ms.Spec.Template.Spec.ProviderSpec.Value = providerSpec(instanceType)
	})
}

func capacity(vcpu, mem, gpu, labels string) map[string]string {
	return map[string]string{scalefromzero.CPUAnnotation: vcpu, scalefromzero.MemoryAnnotation: mem,
		scalefromzero.GPUAnnotation: gpu, scalefromzero.LabelsAnnotation: labels}
}

func testMachineSetFollows(t *testing.T) {
	e := env.For(t)
	ms := newMachineSet("sfz-follow", providerSpec("s1.large"))
	// The user's own label hint and an unrelated annotation must survive.
	ms.Annotations = map[string]string{scalefromzero.LabelsAnnotation: "team=blue", "example.com/keep": "yes"}
	if err := e.Client.Create(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	got := waitAnnotations(t, e, ms.Name, capacity("4", "16384", "0", "team=blue,kubernetes.io/arch=amd64"), corev1.ConditionTrue)
	if got.Annotations["example.com/keep"] != "yes" {
		t.Errorf("unrelated annotation lost: %v", got.Annotations)
	}

	setInstanceType(t, e, ms.Name, "g1.xlarge")
	waitAnnotations(t, e, ms.Name, capacity("8", "61440", "1", "team=blue,kubernetes.io/arch=amd64"), corev1.ConditionTrue)

	setInstanceType(t, e, ms.Name, "a1.large")
	waitAnnotations(t, e, ms.Name, capacity("4", "8192", "0", "team=blue,kubernetes.io/arch=arm64"), corev1.ConditionTrue)

	// A user removing an annotation gets it back.
	updateMachineSet(t, e, ms.Name, false, func(ms *machinev1beta1.MachineSet) {
		delete(ms.Annotations, scalefromzero.CPUAnnotation)
	})
	waitAnnotations(t, e, ms.Name, capacity("4", "8192", "0", "team=blue,kubernetes.io/arch=arm64"), corev1.ConditionTrue)

	// Steady state: nothing is written while nothing changes (resync is 2s here).
	before, _ := getMachineSet(context.Background(), e, ms.Name)
	time.Sleep(5 * time.Second)
	after, _ := getMachineSet(context.Background(), e, ms.Name)
	if before.ResourceVersion != after.ResourceVersion {
		t.Errorf("MachineSet rewritten in steady state: resourceVersion %s -> %s", before.ResourceVersion, after.ResourceVersion)
	}
}

func testMachineSetUnknown(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	ms := newMachineSet("sfz-unknown", providerSpec("s1.large"))
	ms.Annotations = map[string]string{scalefromzero.LabelsAnnotation: "team=red"}
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	waitAnnotations(t, e, ms.Name, capacity("4", "16384", "0", "team=red,kubernetes.io/arch=amd64"), corev1.ConditionTrue)

	// An instance type the catalogue does not know: the stale values go, the user's label
	// stays, and the condition names the field.
	setInstanceType(t, e, ms.Name, "x9.nope")
	got := waitAnnotations(t, e, ms.Name, map[string]string{scalefromzero.LabelsAnnotation: "team=red"}, corev1.ConditionFalse)
	c := mapicond.Get(got.Status.Conditions, scalefromzero.CapacityAnnotatedCondition)
	if c.Reason != scalefromzero.InvalidInstanceTypeReason || !strings.Contains(c.Message, "spec.template.spec.providerSpec.value.instanceType") ||
		!strings.Contains(c.Message, "x9.nope") || c.Severity != machinev1beta1.ConditionSeverityWarning {
		t.Errorf("condition %s (severity %q)", mapiCondition(got), c.Severity)
	}
	e.Eventually(10*time.Second, "Warning event InvalidInstanceType", func(ctx context.Context) (bool, string, error) {
		var events corev1.EventList
		if err := e.Client.List(ctx, &events, client.InNamespace(ns), client.MatchingFields{"involvedObject.name": ms.Name}); err != nil {
			return false, err.Error(), nil
		}
		var seen []string
		for _, ev := range events.Items {
			seen = append(seen, ev.Type+"/"+ev.Reason)
			if ev.Type == corev1.EventTypeWarning && ev.Reason == scalefromzero.InvalidInstanceTypeReason &&
				strings.Contains(ev.Message, "spec.template.spec.providerSpec.value.instanceType") {
				return true, "", nil
			}
		}
		return false, strings.Join(seen, ","), nil
	})

	// Fixing it brings the annotations back.
	setInstanceType(t, e, ms.Name, "s1.xlarge")
	waitAnnotations(t, e, ms.Name, capacity("8", "32768", "0", "team=red,kubernetes.io/arch=amd64"), corev1.ConditionTrue)
}

func testMachineSetCatalogueFile(t *testing.T) {
	e := env.For(t)
	ms := newMachineSet("sfz-custom", providerSpec("x1.custom"))
	if err := e.Client.Create(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	waitAnnotations(t, e, ms.Name, capacity("12", "24576", "2", "kubernetes.io/arch=arm64"), corev1.ConditionTrue)
}

func testMachineSetClusterAPIAuthority(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	ms := newMachineSet("sfz-capi", providerSpec("s1.large"))
	ms.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	e.Eventually(30*time.Second, "Paused=True", func(ctx context.Context) (bool, string, error) {
		got, err := getMachineSet(ctx, e, ms.Name)
		if err != nil {
			return false, err.Error(), nil
		}
		return mapicond.IsTrue(got.Status.Conditions, gate.PausedCondition), fmt.Sprintf("%+v", got.Status.Conditions), nil
	})
	time.Sleep(5 * time.Second) // a few resyncs
	got, _ := getMachineSet(ctx, e, ms.Name)
	if a := capacityAnnotations(got); len(a) != 0 || mapicond.Get(got.Status.Conditions, scalefromzero.CapacityAnnotatedCondition) != nil {
		t.Fatalf("a ClusterAPI-authoritative MachineSet was touched: annotations %v condition %s", a, mapiCondition(got))
	}

	// Authority handed to the Machine API (through Migrating, as the API requires): the
	// controller takes over.
	for _, a := range []machinev1beta1.MachineAuthority{machinev1beta1.MachineAuthorityMigrating, machinev1beta1.MachineAuthorityMachineAPI} {
		updateMachineSet(t, e, ms.Name, true, func(ms *machinev1beta1.MachineSet) { ms.Status.AuthoritativeAPI = a })
	}
	waitAnnotations(t, e, ms.Name, capacity("4", "16384", "0", "kubernetes.io/arch=amd64"), corev1.ConditionTrue)
}

func testMachineSetOtherProvider(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	aws := &runtime.RawExtension{Raw: []byte(`{"apiVersion":"machine.openshift.io/v1beta1","kind":"AWSMachineProviderConfig",` +
		`"ami":{"id":"ami-0123456789"},"instanceType":"s1.large","placement":{"region":"us-east-1","availabilityZone":"us-east-1a"}}`)}
	ms := newMachineSet("sfz-aws", aws)
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	// A control MachineSet created after it is annotated: the controller has had its chance.
	control := newMachineSet("sfz-aws-control", providerSpec("s1.small"))
	if err := e.Client.Create(ctx, control); err != nil {
		t.Fatal(err)
	}
	waitAnnotations(t, e, control.Name, capacity("1", "2048", "0", "kubernetes.io/arch=amd64"), corev1.ConditionTrue)
	time.Sleep(3 * time.Second)
	got, err := getMachineSet(ctx, e, ms.Name)
	if err != nil {
		t.Fatal(err)
	}
	if a := capacityAnnotations(got); len(a) != 0 || mapicond.Get(got.Status.Conditions, scalefromzero.CapacityAnnotatedCondition) != nil {
		t.Fatalf("another provider's MachineSet was annotated: %v condition %s", a, mapiCondition(got))
	}
}

func testMachineSetOutage(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	ms := newMachineSet("sfz-outage", providerSpec("s1.large"))
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	large := capacity("4", "16384", "0", "kubernetes.io/arch=amd64")
	waitAnnotations(t, e, ms.Name, large, corev1.ConditionTrue)

	// The catalogue cannot be read: the last known values stay, the condition says why they
	// may be stale, and the lookup is retried.
	f, err := e.Cloud.CreateFault(ctx, api.Fault{Kind: api.FaultError, Operation: api.OpDescribeInstanceTypes, StatusCode: 503})
	if err != nil {
		t.Fatal(err)
	}
	setInstanceType(t, e, ms.Name, "g1.xlarge")
	got := waitAnnotations(t, e, ms.Name, large, corev1.ConditionUnknown)
	if c := mapicond.Get(got.Status.Conditions, scalefromzero.CapacityAnnotatedCondition); c.Reason != scalefromzero.CloudUnavailableReason {
		t.Errorf("condition %s", mapiCondition(got))
	}
	if _, err := e.Cloud.DeleteFaults(ctx, f.FaultID); err != nil {
		t.Fatal(err)
	}
	waitAnnotations(t, e, ms.Name, capacity("8", "61440", "1", "kubernetes.io/arch=amd64"), corev1.ConditionTrue)
}

// --- Cluster API ---

func newTemplate(name, instanceType, image string) *infrav1.SimMachineTemplate {
	return &infrav1.SimMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: infrav1.SimMachineTemplateSpec{Template: infrav1.SimMachineTemplateResource{
			Spec: infrav1.SimMachineSpec{InstanceSpec: infrav1.InstanceSpec{InstanceType: instanceType, Image: image}},
		}},
	}
}

func getTemplate(ctx context.Context, e *testenv.Env, name string) (*infrav1.SimMachineTemplate, error) {
	t := &infrav1.SimMachineTemplate{}
	return t, e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, t)
}

func describeStatus(s infrav1.SimMachineTemplateStatus) string {
	var parts []string
	for k, v := range s.Capacity {
		parts = append(parts, string(k)+"="+v.String())
	}
	ni := "<nil>"
	if s.NodeInfo != nil {
		ni = s.NodeInfo.OperatingSystem + "/" + s.NodeInfo.Architecture
	}
	c := meta.FindStatusCondition(s.Conditions, simmachinetemplate.CapacityReportedCondition)
	cs := "<none>"
	if c != nil {
		cs = fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
	}
	return fmt.Sprintf("capacity %v nodeInfo %s condition %s", parts, ni, cs)
}

// wantCapacity is what status.capacity must hold exactly (quantities compared by value).
type wantCapacity map[corev1.ResourceName]string

func (w wantCapacity) matches(got corev1.ResourceList) bool {
	if len(got) != len(w) {
		return false
	}
	for k, v := range w {
		q, ok := got[k]
		if !ok || q.Cmp(resource.MustParse(v)) != 0 {
			return false
		}
	}
	return true
}

func waitTemplate(t *testing.T, e *testenv.Env, name string, capacity wantCapacity, nodeInfo *infrav1.NodeInfo, cond metav1.ConditionStatus) *infrav1.SimMachineTemplate {
	t.Helper()
	var tmpl *infrav1.SimMachineTemplate
	e.Eventually(30*time.Second, fmt.Sprintf("%s: capacity %v nodeInfo %+v", name, capacity, nodeInfo), func(ctx context.Context) (bool, string, error) {
		var err error
		if tmpl, err = getTemplate(ctx, e, name); err != nil {
			return false, err.Error(), nil
		}
		s := tmpl.Status
		niOK := (nodeInfo == nil && s.NodeInfo == nil) || (nodeInfo != nil && s.NodeInfo != nil && *nodeInfo == *s.NodeInfo)
		c := meta.FindStatusCondition(s.Conditions, simmachinetemplate.CapacityReportedCondition)
		return capacity.matches(s.Capacity) && niOK && c != nil && c.Status == cond && c.ObservedGeneration == tmpl.Generation,
			describeStatus(s), nil
	})
	return tmpl
}

// update applies mutate to the latest copy of obj, retrying on conflicts with the
// controllers writing it concurrently.
func update[T client.Object](t *testing.T, e *testenv.Env, obj T, mutate func(T)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := e.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		mutate(obj)
		return e.Client.Update(context.Background(), obj)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func setTemplateSpec(t *testing.T, e *testenv.Env, name, instanceType, image string) {
	t.Helper()
	update(t, e, newTemplate(name, "", ""), func(tmpl *infrav1.SimMachineTemplate) {
		tmpl.Spec.Template.Spec.InstanceType, tmpl.Spec.Template.Spec.Image = instanceType, image
	})
}

func testTemplateFollows(t *testing.T) {
	e := env.For(t)
	tmpl := newTemplate("sfz-template", "s1.large", "sim-rhcos-9")
	if err := e.Client.Create(context.Background(), tmpl); err != nil {
		t.Fatal(err)
	}
	linuxAMD := &infrav1.NodeInfo{Architecture: "amd64", OperatingSystem: "linux"}
	got := waitTemplate(t, e, tmpl.Name, wantCapacity{"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"},
		linuxAMD, metav1.ConditionTrue)
	if !meta.IsStatusConditionFalse(got.Status.Conditions, clusterv1.PausedCondition) {
		t.Errorf("Paused condition should be False: %+v", got.Status.Conditions)
	}

	setTemplateSpec(t, e, tmpl.Name, "g1.xlarge", "sim-rhcos-9")
	waitTemplate(t, e, tmpl.Name, wantCapacity{"cpu": "8", "memory": "60Gi", "pods": "110", "ephemeral-storage": "100Gi", "nvidia.com/gpu": "1"},
		linuxAMD, metav1.ConditionTrue)

	setTemplateSpec(t, e, tmpl.Name, "a1.large", "sim-ubuntu-24.04-arm64")
	waitTemplate(t, e, tmpl.Name, wantCapacity{"cpu": "4", "memory": "8Gi", "pods": "110", "ephemeral-storage": "100Gi"},
		&infrav1.NodeInfo{Architecture: "arm64", OperatingSystem: "linux"}, metav1.ConditionTrue)

	// The catalogue file's instance type and image: its own GPU resource, pods and disk, and
	// the image's operating system.
	setTemplateSpec(t, e, tmpl.Name, "x1.custom", "sim-windows-2025")
	waitTemplate(t, e, tmpl.Name, wantCapacity{"cpu": "12", "memory": "24Gi", "pods": "250", "ephemeral-storage": "200Gi", "amd.com/gpu": "2"},
		&infrav1.NodeInfo{Architecture: "arm64", OperatingSystem: "windows"}, metav1.ConditionTrue)

	// Unknown: capacity and nodeInfo cleared, the condition names the field.
	setTemplateSpec(t, e, tmpl.Name, "x9.nope", "sim-rhcos-9")
	got = waitTemplate(t, e, tmpl.Name, wantCapacity{}, nil, metav1.ConditionFalse)
	c := meta.FindStatusCondition(got.Status.Conditions, simmachinetemplate.CapacityReportedCondition)
	if c.Reason != simmachinetemplate.InvalidInstanceTypeReason || !strings.Contains(c.Message, "spec.template.spec.instanceType") || !strings.Contains(c.Message, "x9.nope") {
		t.Errorf("condition %+v", c)
	}

	setTemplateSpec(t, e, tmpl.Name, "s1.small", "sim-rhcos-9")
	before := waitTemplate(t, e, tmpl.Name, wantCapacity{"cpu": "1", "memory": "2Gi", "pods": "110", "ephemeral-storage": "100Gi"},
		linuxAMD, metav1.ConditionTrue)

	// Steady state: resyncs (2s here) write nothing.
	time.Sleep(5 * time.Second)
	after, err := getTemplate(context.Background(), e, tmpl.Name)
	if err != nil {
		t.Fatal(err)
	}
	if before.ResourceVersion != after.ResourceVersion {
		t.Errorf("template rewritten in steady state: resourceVersion %s -> %s", before.ResourceVersion, after.ResourceVersion)
	}
}

func testTemplatePaused(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()

	// Paused by annotation.
	tmpl := newTemplate("sfz-paused", "s1.large", "sim-rhcos-9")
	tmpl.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	if err := e.Client.Create(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	waitPausedUntouched(t, e, tmpl.Name)
	update(t, e, tmpl, func(tmpl *infrav1.SimMachineTemplate) { delete(tmpl.Annotations, clusterv1.PausedAnnotation) })
	waitTemplate(t, e, tmpl.Name, wantCapacity{"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"},
		&infrav1.NodeInfo{Architecture: "amd64", OperatingSystem: "linux"}, metav1.ConditionTrue)

	// Paused through its Cluster's spec.paused; unpausing the Cluster brings it back.
	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "sfz-cluster", Namespace: ns}, Spec: clusterv1.ClusterSpec{Paused: ptr.To(true)}}
	if err := e.Client.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	tmpl = newTemplate("sfz-cluster-paused", "a1.xlarge", "sim-rhcos-9")
	tmpl.Labels = map[string]string{clusterv1.ClusterNameLabel: cl.Name}
	if err := e.Client.Create(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	waitPausedUntouched(t, e, tmpl.Name)
	update(t, e, cl, func(cl *clusterv1.Cluster) { cl.Spec.Paused = ptr.To(false) })
	waitTemplate(t, e, tmpl.Name, wantCapacity{"cpu": "8", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"},
		&infrav1.NodeInfo{Architecture: "arm64", OperatingSystem: "linux"}, metav1.ConditionTrue)
}

// waitPausedUntouched waits for Paused=True and checks that, a few resyncs later, nothing but
// that condition was written.
func waitPausedUntouched(t *testing.T, e *testenv.Env, name string) {
	t.Helper()
	e.Eventually(30*time.Second, name+": Paused=True", func(ctx context.Context) (bool, string, error) {
		tmpl, err := getTemplate(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		return meta.IsStatusConditionTrue(tmpl.Status.Conditions, clusterv1.PausedCondition), fmt.Sprintf("%+v", tmpl.Status.Conditions), nil
	})
	time.Sleep(5 * time.Second)
	tmpl, err := getTemplate(context.Background(), e, name)
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.Status.Capacity != nil || tmpl.Status.NodeInfo != nil ||
		meta.FindStatusCondition(tmpl.Status.Conditions, simmachinetemplate.CapacityReportedCondition) != nil {
		t.Fatalf("a paused template was reconciled: %s", describeStatus(tmpl.Status))
	}
}
