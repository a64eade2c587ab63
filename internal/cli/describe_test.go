package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/provider"
)

func owned(kind, name string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{Kind: kind, Name: name, Controller: ptr.To(true)}}
}

// The tree puts MachinePool Machines under their pool and MachineSet Machines under their
// set, with both APIs' views side by side.
func TestDescribeTree(t *testing.T) {
	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "lab"},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{Kind: "SimCluster", Name: "lab"}}}
	s := &snapshot{
		mapiSets: map[string]*machinev1beta1.MachineSet{"workers": {ObjectMeta: metav1.ObjectMeta{Name: "workers"},
			Spec:   machinev1beta1.MachineSetSpec{Replicas: ptr.To[int32](1)},
			Status: machinev1beta1.MachineSetStatus{AuthoritativeAPI: "MachineAPI", ReadyReplicas: 1}}},
		capiSets: map[string]*clusterv1.MachineSet{"workers": {ObjectMeta: metav1.ObjectMeta{Name: "workers",
			Annotations: map[string]string{clusterv1.PausedAnnotation: ""}}, Spec: clusterv1.MachineSetSpec{ClusterName: "lab", Replicas: ptr.To[int32](1)}}},
		mapiMachines: map[string]*machinev1beta1.Machine{"workers-a": {ObjectMeta: metav1.ObjectMeta{Name: "workers-a", OwnerReferences: owned("MachineSet", "workers")},
			Status: machinev1beta1.MachineStatus{AuthoritativeAPI: "MachineAPI", Phase: ptr.To("Running"),
				NodeRef:    &corev1.ObjectReference{Name: "node-a"},
				Conditions: []machinev1beta1.Condition{{Type: "Synchronized", Status: corev1.ConditionFalse, Message: "spec.providerSpec.value.region: differs"}}}}},
		capiMachines: map[string]*clusterv1.Machine{"pool-x1": {ObjectMeta: metav1.ObjectMeta{Name: "pool-x1", OwnerReferences: owned("MachinePool", "pool")},
			Spec: clusterv1.MachineSpec{ClusterName: "lab"}, Status: clusterv1.MachineStatus{Phase: "Running", NodeRef: clusterv1.MachineNodeReference{Name: "node-p"}}}},
		pools: []clusterv1.MachinePool{{ObjectMeta: metav1.ObjectMeta{Name: "pool"}, Spec: clusterv1.MachinePoolSpec{ClusterName: "lab", Replicas: ptr.To[int32](1)}}},
		nodes: map[string]*corev1.Node{
			"node-a": {ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}},
			"node-p": {ObjectMeta: metav1.ObjectMeta{Name: "node-p"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}}},
		},
	}
	var b bytes.Buffer
	printer{out: &b}.cluster(describeCluster(cl, s))
	got := b.String()
	lines := strings.Split(got, "\n")
	want := []string{
		"Cluster lab  infrastructure SimCluster/lab not provisioned",
		"├─ MachineSet workers  authority MachineAPI  Synchronized ?  MAPI 1/1 ready  CAPI 0/1 ready  CAPI paused",
		"│  ├─ Machine workers-a  authority MachineAPI  NOT Synchronized: spec.providerSpec.value.region: differs  MAPI Running",
		"│  │  └─ Node node-a  Ready",
		"└─ MachinePool pool  replicas 0/1 ready (Cluster API only)",
		"   ├─ Machine pool-x1  CAPI Running",
		"   │  └─ Node node-p  NotReady",
	}
	for i, w := range want {
		if i >= len(lines) || strings.TrimRight(lines[i], " ") != w {
			t.Fatalf("line %d:\n got %q\nwant %q\nwhole output:\n%s", i, lines[min(i, len(lines)-1)], w, got)
		}
	}
	var colour bytes.Buffer
	printer{out: &colour, color: true}.cluster(describeCluster(cl, s))
	if !strings.Contains(colour.String(), "\x1b[31mNOT Synchronized") {
		t.Errorf("a failed sync should be red on a terminal:\n%q", colour.String())
	}
}

// A MachineDeployment is shown with its revision and up-to-date counts, above the
// MachineSets it controls (oldest revision first), which are not repeated at the top level.
func TestDescribeMachineDeployments(t *testing.T) {
	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "lab"},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{Kind: "SimCluster", Name: "lab"}}}
	set := func(name, rev string) *clusterv1.MachineSet {
		return &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: owned("MachineDeployment", "workers"),
			Annotations: map[string]string{clusterv1.RevisionAnnotation: rev}},
			Spec:   clusterv1.MachineSetSpec{ClusterName: "lab", Replicas: ptr.To[int32](1)},
			Status: clusterv1.MachineSetStatus{ReadyReplicas: ptr.To[int32](1)}}
	}
	machine := func(name, set string) *clusterv1.Machine {
		return &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: owned("MachineSet", set)},
			Spec: clusterv1.MachineSpec{ClusterName: "lab"}, Status: clusterv1.MachineStatus{Phase: "Running"}}
	}
	s := &snapshot{
		mapiSets:     map[string]*machinev1beta1.MachineSet{},
		capiSets:     map[string]*clusterv1.MachineSet{"workers-new": set("workers-new", "2"), "workers-old": set("workers-old", "1")},
		mapiMachines: map[string]*machinev1beta1.Machine{},
		capiMachines: map[string]*clusterv1.Machine{"m-old": machine("m-old", "workers-old"), "m-new": machine("m-new", "workers-new")},
		deployments: []clusterv1.MachineDeployment{{ObjectMeta: metav1.ObjectMeta{Name: "workers",
			Annotations: map[string]string{clusterv1.RevisionAnnotation: "2"}},
			Spec: clusterv1.MachineDeploymentSpec{ClusterName: "lab", Replicas: ptr.To[int32](2)},
			Status: clusterv1.MachineDeploymentStatus{UpToDateReplicas: ptr.To[int32](1), AvailableReplicas: ptr.To[int32](2),
				Conditions: []metav1.Condition{{Type: clusterv1.MachineDeploymentRollingOutCondition, Status: metav1.ConditionTrue}}}}},
		nodes: map[string]*corev1.Node{},
	}
	var b bytes.Buffer
	printer{out: &b}.cluster(describeCluster(cl, s))
	got := strings.TrimRight(b.String(), "\n")
	want := []string{
		"Cluster lab  infrastructure SimCluster/lab not provisioned",
		"├─ MachineDeployment workers  revision 2  1/2 up to date  2/2 available  rolling out",
		"│  ├─ MachineSet workers-old  Cluster API only  CAPI 1/1 ready  revision 1",
		"│  │  ├─ Machine m-old  CAPI Running",
		"│  └─ MachineSet workers-new  Cluster API only  CAPI 1/1 ready  revision 2",
		"│     ├─ Machine m-new  CAPI Running",
	}
	lines := strings.Split(got, "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), got)
	}
	for i, w := range want {
		if strings.TrimRight(lines[i], " ") != w {
			t.Errorf("line %d:\n got %q\nwant %q", i, lines[i], w)
		}
	}
}

// describeObjects is a lab in both APIs: a MachineSet in both, whose migration to the Cluster
// API waits and one of whose Machines fails to synchronize; a Machine only in the Cluster
// API; a MachineDeployment with two revisions; a MachinePool; and a loose Machine API Machine.
func describeObjects() []client.Object {
	const mapiNS, capiNS = manager.DefaultMachineAPINamespace, manager.DefaultClusterAPINamespace
	capiMachine := func(name, ownerKind, owner, phase, node string) *clusterv1.Machine {
		return &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: capiNS, OwnerReferences: owned(ownerKind, owner)},
			Spec: clusterv1.MachineSpec{ClusterName: "lab"}, Status: clusterv1.MachineStatus{Phase: phase, NodeRef: clusterv1.MachineNodeReference{Name: node}}}
	}
	capiSet := func(name, md, rev string) *clusterv1.MachineSet {
		return &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: capiNS, OwnerReferences: owned("MachineDeployment", md),
			Annotations: map[string]string{clusterv1.RevisionAnnotation: rev}}, Spec: clusterv1.MachineSetSpec{ClusterName: "lab", Replicas: ptr.To[int32](1)}}
	}
	node := func(name string, ready corev1.ConditionStatus) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
	}
	return []client.Object{
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "lab", Namespace: capiNS},
			Spec:   clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{Kind: "SimCluster", Name: "lab"}},
			Status: clusterv1.ClusterStatus{Initialization: clusterv1.ClusterInitializationStatus{InfrastructureProvisioned: ptr.To(true)}}},
		&machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: mapiNS},
			Spec: machinev1beta1.MachineSetSpec{Replicas: ptr.To[int32](2), AuthoritativeAPI: "ClusterAPI"},
			Status: machinev1beta1.MachineSetStatus{AuthoritativeAPI: "MachineAPI", ReadyReplicas: 1, Conditions: []machinev1beta1.Condition{
				{Type: "Synchronized", Status: corev1.ConditionTrue},
				{Type: "AuthorityMigration", Status: corev1.ConditionFalse, Reason: "Waiting", Message: "waiting for workers-a to synchronize"}}}},
		&clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: capiNS, Annotations: map[string]string{clusterv1.PausedAnnotation: ""}},
			Spec: clusterv1.MachineSetSpec{ClusterName: "lab", Replicas: ptr.To[int32](2)}},
		&machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "workers-a", Namespace: mapiNS, OwnerReferences: owned("MachineSet", "workers")},
			Status: machinev1beta1.MachineStatus{AuthoritativeAPI: "MachineAPI", Phase: ptr.To("Running"), NodeRef: &corev1.ObjectReference{Name: "node-a"},
				Conditions: []machinev1beta1.Condition{{Type: "Synchronized", Status: corev1.ConditionFalse, Reason: "ConversionFailed", Message: "region: differs"}}}},
		capiMachine("workers-a", "MachineSet", "workers", "Running", "node-a"),
		capiMachine("workers-b", "MachineSet", "workers", "Provisioning", ""),
		&clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "md", Namespace: capiNS, Annotations: map[string]string{clusterv1.RevisionAnnotation: "2"}},
			Spec:   clusterv1.MachineDeploymentSpec{ClusterName: "lab", Replicas: ptr.To[int32](1), Paused: ptr.To(true)},
			Status: clusterv1.MachineDeploymentStatus{UpToDateReplicas: ptr.To[int32](1), AvailableReplicas: ptr.To[int32](1)}},
		capiSet("md-2", "md", "2"), capiSet("md-1", "md", "1"),
		capiMachine("md-2-x", "MachineSet", "md-2", "Running", ""),
		&clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: capiNS}, Spec: clusterv1.MachinePoolSpec{ClusterName: "lab", Replicas: ptr.To[int32](1)}},
		capiMachine("pool-x1", "MachinePool", "pool", "Running", "node-p"),
		&machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "stray", Namespace: mapiNS},
			Spec: machinev1beta1.MachineSpec{AuthoritativeAPI: "ClusterAPI"}, Status: machinev1beta1.MachineStatus{AuthoritativeAPI: "ClusterAPI"}},
		node("node-a", corev1.ConditionTrue), node("node-p", corev1.ConditionFalse),
	}
}

// runDescribeFake runs describe against a fake API server holding describeObjects.
func runDescribeFake(t *testing.T, output, capiNS, only string) (string, error) {
	t.Helper()
	sch, err := provider.Builtin().Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(sch).WithObjects(describeObjects()...).Build()
	f := &describeFlags{mapiNS: manager.DefaultMachineAPINamespace, capiNS: capiNS, color: "always", output: output}
	var b bytes.Buffer
	err = describe(t.Context(), c, f, only, &b)
	return b.String(), err
}

func names[T any](items []T, name func(T) string) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, name(it))
	}
	return out
}

func machineNames(ms []machineView) []string {
	return names(ms, func(m machineView) string { return m.Name })
}

func setNames(ms []machineSetView) []string {
	return names(ms, func(m machineSetView) string { return m.Name })
}

// -o json carries what the tree shows: the hierarchy, each side's authority, Synchronized
// condition, phases, pauses and the pending migration; a side an API lacks is left out.
func TestDescribeJSON(t *testing.T) {
	out, err := runDescribeFake(t, "json", manager.DefaultClusterAPINamespace, "")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "\x1b[") {
		t.Errorf("--color=always should not colour JSON:\n%s", out)
	}
	var doc describeOutput
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(doc.Clusters) != 1 {
		t.Fatalf("clusters: got %d, want 1:\n%s", len(doc.Clusters), out)
	}
	cl := doc.Clusters[0]
	if cl.Name != "lab" || cl.Infrastructure != (refView{Kind: "SimCluster", Name: "lab"}) || !cl.InfrastructureProvisioned || cl.Paused {
		t.Errorf("cluster: got %+v", cl)
	}
	checkDescribeDeployments(t, cl.MachineDeployments)
	checkDescribeWorkers(t, cl.MachineSets)
	if len(cl.MachinePools) != 1 || cl.MachinePools[0].Name != "pool" || cl.MachinePools[0].Replicas != 1 ||
		!slices.Equal(machineNames(cl.MachinePools[0].Machines), []string{"pool-x1"}) {
		t.Fatalf("machinePools: got %+v", cl.MachinePools)
	}
	if px := cl.MachinePools[0].Machines[0]; px.MachineAPI != nil || px.Node == nil || px.Node.Name != "node-p" || px.Node.Ready {
		t.Errorf("pool-x1: want Cluster API only on NotReady node-p, got %+v", px)
	}
	if got := machineNames(cl.Machines); !slices.Equal(got, []string{"stray"}) {
		t.Fatalf("loose machines: got %v, want [stray]", got)
	}
	stray := cl.Machines[0]
	if stray.MachineAPI == nil || stray.MachineAPI.AuthoritativeAPI != (authorityView{Spec: "ClusterAPI", Status: "ClusterAPI"}) ||
		stray.MachineAPI.Synchronized != nil || stray.ClusterAPI != nil {
		t.Errorf("stray: want Machine API only, ClusterAPI authoritative, no Synchronized yet; got %+v / %+v", stray, stray.MachineAPI)
	}
	for _, key := range []string{`"clusters": [`, `"authoritativeAPI": {`, `"machineDeployments": [`, `"upToDateReplicas": 1`} {
		if !strings.Contains(out, key) {
			t.Errorf("JSON lacks %s:\n%s", key, out)
		}
	}
}

func checkDescribeDeployments(t *testing.T, mds []deploymentView) {
	t.Helper()
	if len(mds) != 1 {
		t.Fatalf("machineDeployments: got %+v", mds)
	}
	md := mds[0]
	if md.Name != "md" || md.Revision != "2" || md.Replicas != 1 || md.UpToDateReplicas != 1 || !md.RolloutPaused || md.RollingOut || md.Paused {
		t.Errorf("md: got %+v", md)
	}
	if got := setNames(md.MachineSets); !slices.Equal(got, []string{"md-1", "md-2"}) {
		t.Fatalf("md's machineSets: got %v, want [md-1 md-2] (oldest revision first)", got)
	}
	if got := machineNames(md.MachineSets[1].Machines); !slices.Equal(got, []string{"md-2-x"}) || md.MachineSets[1].ClusterAPI.Revision != "2" {
		t.Errorf("md-2: got %+v, machines %v", md.MachineSets[1].ClusterAPI, got)
	}
}

func checkDescribeWorkers(t *testing.T, sets []machineSetView) {
	t.Helper()
	if got := setNames(sets); !slices.Equal(got, []string{"workers"}) {
		t.Fatalf("top-level machineSets: got %v, want [workers]", got)
	}
	w := sets[0]
	if w.MachineAPI == nil || w.ClusterAPI == nil {
		t.Fatalf("workers: want both sides, got %+v", w)
	}
	mapi := w.MachineAPI
	if mapi.AuthoritativeAPI != (authorityView{Spec: "ClusterAPI", Status: "MachineAPI"}) || mapi.Synchronized == nil || mapi.Synchronized.Status != "True" ||
		mapi.Replicas != 2 || mapi.ReadyReplicas != 1 {
		t.Errorf("workers machineAPI: got %+v (synchronized %+v)", mapi, mapi.Synchronized)
	}
	if m := mapi.AuthorityMigration; m == nil || m.Status != "False" || m.Message != "waiting for workers-a to synchronize" {
		t.Errorf("workers authorityMigration: got %+v", m)
	}
	if !w.ClusterAPI.Paused || w.ClusterAPI.Replicas != 2 {
		t.Errorf("workers clusterAPI: got %+v", w.ClusterAPI)
	}
	if got := machineNames(w.Machines); !slices.Equal(got, []string{"workers-a", "workers-b"}) {
		t.Fatalf("workers' machines: got %v", got)
	}
	a, b := w.Machines[0], w.Machines[1]
	if a.MachineAPI == nil || a.MachineAPI.Phase != "Running" || a.MachineAPI.Synchronized == nil ||
		*a.MachineAPI.Synchronized != (conditionView{Status: "False", Reason: "ConversionFailed", Message: "region: differs"}) ||
		a.ClusterAPI == nil || a.ClusterAPI.Phase != "Running" || a.Node == nil || *a.Node != (nodeView{Name: "node-a", Ready: true}) {
		t.Errorf("workers-a: got %+v / %+v / %+v", a, a.MachineAPI, a.Node)
	}
	if b.MachineAPI != nil || b.ClusterAPI == nil || b.ClusterAPI.Phase != "Provisioning" || b.Node != nil {
		t.Errorf("workers-b: want Cluster API only, Provisioning, no Node; got %+v", b)
	}
}

// -o yaml is the same document as -o json; the tree drawn from the same walk shows the
// pending authority change and migration; no Clusters is an empty list, not null.
func TestDescribeYAMLAndTreeAgree(t *testing.T) {
	js, err := runDescribeFake(t, "json", manager.DefaultClusterAPINamespace, "")
	if err != nil {
		t.Fatal(err)
	}
	ys, err := runDescribeFake(t, "yaml", manager.DefaultClusterAPINamespace, "lab")
	if err != nil {
		t.Fatal(err)
	}
	var fromJSON, fromYAML describeOutput
	if err := json.Unmarshal([]byte(js), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(ys), &fromYAML); err != nil {
		t.Fatalf("not YAML of describeOutput: %v\n%s", err, ys)
	}
	if !reflect.DeepEqual(fromJSON, fromYAML) {
		t.Errorf("-o yaml differs from -o json:\n%s\n%s", ys, js)
	}
	tree, err := runDescribeFake(t, "tree", manager.DefaultClusterAPINamespace, "")
	if err != nil {
		t.Fatal(err)
	}
	tree = regexp.MustCompile("\x1b\\[[0-9]+m").ReplaceAllString(tree, "")
	for _, want := range []string{
		"├─ MachineSet workers  authority MachineAPI → ClusterAPI  Synchronized  MAPI 1/2 ready  migration: waiting for workers-a to synchronize  CAPI 0/2 ready  CAPI paused",
		"├─ MachineDeployment md  revision 2  1/1 up to date  1/1 available  rollout paused",
		"  ├─ Machine stray  authority ClusterAPI  Synchronized ?  MAPI -",
	} {
		if !strings.Contains(tree, want+"\n") {
			t.Errorf("tree lacks %q:\n%s", want, tree)
		}
	}
	for format, want := range map[string]string{"json": "{\n  \"clusters\": []\n}\n", "yaml": "clusters: []\n"} {
		if got, err := runDescribeFake(t, format, "empty", ""); err != nil || got != want {
			t.Errorf("-o %s without Clusters: got %q, %v; want %q", format, got, err, want)
		}
	}
	var exit *ExitError
	if _, err := runDescribeFake(t, "json", manager.DefaultClusterAPINamespace, "nope"); !errors.As(err, &exit) || exit.Code != 1 {
		t.Errorf("-o json cluster/nope: want exit 1, got %v", err)
	}
}

// An unknown -o value is a usage error (exit 2) naming --output and the values it takes,
// given before any cluster is asked.
func TestDescribeBadOutput(t *testing.T) {
	cmd := newDescribeCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"-o", "xml", "--kubeconfig", filepath.Join(t.TempDir(), "absent")})
	err := cmd.ExecuteContext(t.Context())
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code != 2 {
		t.Fatalf("want exit 2, got %v", err)
	}
	for _, want := range []string{"--output", `"xml"`, "tree, json or yaml"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}
