package cli

import (
	"bytes"
	"strings"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
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
	printer{out: &b}.cluster(cl, s)
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
	printer{out: &colour, color: true}.cluster(cl, s)
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
	printer{out: &b}.cluster(cl, s)
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
