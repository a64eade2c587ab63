package machinedeployment

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
)

// versioned gives the set's Machines spec.version v and, for the first kubelet ones, a Node
// reporting v as kubelet version.
func versioned(s *set, v string, kubelet int) *set {
	for i, m := range s.machines {
		m.Spec.Version = v
		if i < kubelet {
			m.Status.NodeInfo = &corev1.NodeSystemInfo{KubeletVersion: v}
		}
	}
	return s
}

// Mid-rollout, status.versions adds up the Machines of every MachineSet by version, those
// being deleted included, lowest version first.
func TestUpdateStatusVersionsSpanMachineSets(t *testing.T) {
	old := versioned(fakeSet("o", 2, "AAd"), "v1.32.3", 3)
	cur := versioned(fakeSet("n", 2, "Au"), "v1.33.1", 1)
	none := fakeSet("x", 1, "A") // a Machine without any version is not counted
	md := &clusterv1.MachineDeployment{Spec: clusterv1.MachineDeploymentSpec{Replicas: ptr.To[int32](3)}}
	updateStatus(md, &deploymentSets{sets: []*set{cur, old, none}, current: cur}, strategy{replicas: 3, surge: 1}, nil)
	want := []clusterv1.StatusVersion{{Version: "v1.32.3", Replicas: 3}, {Version: "v1.33.1", Replicas: 2}}
	if fmt.Sprint(md.Status.Versions) != fmt.Sprint(want) {
		t.Errorf("versions %v, want %v", md.Status.Versions, want)
	}

	// Rolled out: only the new version is left.
	updateStatus(md, &deploymentSets{sets: []*set{cur}, current: cur}, strategy{replicas: 3, surge: 1}, nil)
	want = []clusterv1.StatusVersion{{Version: "v1.33.1", Replicas: 2}}
	if fmt.Sprint(md.Status.Versions) != fmt.Sprint(want) {
		t.Errorf("after the rollout: versions %v, want %v", md.Status.Versions, want)
	}

	updateStatus(md, &deploymentSets{}, strategy{}, nil)
	if md.Status.Versions != nil {
		t.Errorf("no MachineSets: versions %v, want none", md.Status.Versions)
	}
}

// MachinesReady is True or False: a Machine whose Ready is Unknown or missing is not ready.
func TestMachinesReadyNeverUnknown(t *testing.T) {
	s := fakeSet("n", 2, "AA")
	s.machines[0].Status.Conditions = append(s.machines[0].Status.Conditions,
		metav1.Condition{Type: clusterv1.MachineReadyCondition, Status: metav1.ConditionTrue, Reason: clusterv1.MachineReadyReason})
	s.machines[1].Status.Conditions = append(s.machines[1].Status.Conditions,
		metav1.Condition{Type: clusterv1.MachineReadyCondition, Status: metav1.ConditionUnknown, Reason: "NodeLost", Message: "Node lost"})
	md := &clusterv1.MachineDeployment{Spec: clusterv1.MachineDeploymentSpec{Replicas: ptr.To[int32](2)}}
	updateStatus(md, &deploymentSets{sets: []*set{s}, current: s}, strategy{replicas: 2}, nil)
	c := conditions.Get(md, clusterv1.MachineDeploymentMachinesReadyCondition)
	if c.Status != metav1.ConditionFalse || c.Reason != clusterv1.MachineDeploymentMachinesNotReadyReason || c.Message != "* Machine n-1: Node lost" {
		t.Errorf("MachinesReady = %s/%s %q, want False/NotReady naming n-1", c.Status, c.Reason, c.Message)
	}
	s.machines[1].Status.Conditions[1].Status = metav1.ConditionTrue
	updateStatus(md, &deploymentSets{sets: []*set{s}, current: s}, strategy{replicas: 2}, nil)
	if c := conditions.Get(md, clusterv1.MachineDeploymentMachinesReadyCondition); c.Status != metav1.ConditionTrue ||
		c.Reason != clusterv1.MachineDeploymentMachinesReadyReason {
		t.Errorf("all Ready: MachinesReady = %s/%s %q", c.Status, c.Reason, c.Message)
	}
}
