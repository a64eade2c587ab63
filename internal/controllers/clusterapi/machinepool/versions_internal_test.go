package machinepool

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// A pool whose InfraMachinePool has Machines counts its Machines (kubelet version, else
// spec.version) and ignores the Nodes; one without Machines counts its Nodes' kubelet
// versions, and keeps the versions it had while the Nodes cannot be read.
func TestSetVersions(t *testing.T) {
	kept := []clusterv1.StatusVersion{{Version: "v1.31.0", Replicas: 2}}
	m := func(spec, kubelet string) *clusterv1.Machine {
		m := &clusterv1.Machine{Spec: clusterv1.MachineSpec{Version: spec}}
		if kubelet != "" {
			m.Status.NodeInfo = &corev1.NodeSystemInfo{KubeletVersion: kubelet}
		}
		return m
	}
	n := func(kubelet string) *corev1.Node {
		return &corev1.Node{Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: kubelet}}}
	}
	machines := []*clusterv1.Machine{m("v1.33.0", ""), m("v1.33.0", "v1.32.2"), m("", "")}
	nodes := []*corev1.Node{n("v1.30.9"), n("v1.30.9")}
	for _, tc := range []struct {
		name        string
		hasMachines bool
		machines    []*clusterv1.Machine
		nodes       []*corev1.Node
		nodesRead   bool
		want        []clusterv1.StatusVersion
	}{
		{"Machines", true, machines, nodes, true, []clusterv1.StatusVersion{{Version: "v1.32.2", Replicas: 1}, {Version: "v1.33.0", Replicas: 1}}},
		{"Machines, Nodes unreadable", true, machines, nil, false, []clusterv1.StatusVersion{{Version: "v1.32.2", Replicas: 1}, {Version: "v1.33.0", Replicas: 1}}},
		{"no Machines yet: none, whatever the Nodes", true, nil, nodes, true, nil},
		{"Nodes", false, nil, nodes, true, []clusterv1.StatusVersion{{Version: "v1.30.9", Replicas: 2}}},
		{"no Nodes", false, nil, nil, true, nil},
		{"Nodes unreadable: kept", false, nil, nil, false, kept},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mp := &clusterv1.MachinePool{Status: clusterv1.MachinePoolStatus{Versions: kept}}
			setVersions(mp, tc.hasMachines, tc.machines, tc.nodes, tc.nodesRead)
			if fmt.Sprint(mp.Status.Versions) != fmt.Sprint(tc.want) || (tc.want == nil) != (mp.Status.Versions == nil) {
				t.Errorf("versions %v, want %v", mp.Status.Versions, tc.want)
			}
		})
	}
}
