package versions

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

func machine(name string, created time.Time, spec, kubelet string) *clusterv1.Machine {
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)}}
	m.Spec.Version = spec
	if kubelet != "" {
		m.Status.NodeInfo = &corev1.NodeSystemInfo{KubeletVersion: kubelet}
	}
	return m
}

func text(vs []clusterv1.StatusVersion) string {
	if vs == nil {
		return "nil"
	}
	return fmt.Sprint(vs)
}

// A Machine counts under its Node's kubelet version, else its spec.version; Machines with
// neither (and nil entries) are left out; versions come lowest first with their counts.
func TestFromMachinesCountsKubeletThenSpecVersion(t *testing.T) {
	now := time.Now()
	deleting := machine("d", now, "v1.31.1", "")
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	got := FromMachines([]*clusterv1.Machine{
		nil,
		machine("none", now, "", ""),
		machine("a", now, "v1.32.0", ""),
		machine("b", now, "v1.31.1", ""),
		deleting,
		machine("c", now, "v1.31.1", "v1.30.0"),
		machine("e", now, "v1.31.1", "v1.31.1"),
	})
	want := []clusterv1.StatusVersion{{Version: "v1.30.0", Replicas: 1}, {Version: "v1.31.1", Replicas: 3},
		{Version: "v1.32.0", Replicas: 1}}
	if text(got) != text(want) {
		t.Errorf("got %s, want %s", text(got), text(want))
	}
}

func TestFromMachinesNilWithoutVersions(t *testing.T) {
	if got := FromMachines(nil); got != nil {
		t.Errorf("no Machines: got %v", got)
	}
	if got := FromMachines([]*clusterv1.Machine{machine("a", time.Now(), "", "")}); got != nil {
		t.Errorf("no versions: got %v", got)
	}
}

// Versions that differ only in non-numeric build metadata cannot be ordered: the one of the
// older Machine comes first, whatever the list order.
func TestFromMachinesUnorderableBuildsFollowCreation(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	got := FromMachines([]*clusterv1.Machine{
		machine("newer", base.Add(time.Minute), "v1.32.0+aaa", ""),
		machine("older", base, "v1.32.0+bbb", ""),
	})
	want := []clusterv1.StatusVersion{{Version: "v1.32.0+bbb", Replicas: 1}, {Version: "v1.32.0+aaa", Replicas: 1}}
	if text(got) != text(want) {
		t.Errorf("got %s, want %s", text(got), text(want))
	}
	// Same creation time: by name.
	got = FromMachines([]*clusterv1.Machine{machine("b", base, "v1.32.0+aaa", ""), machine("a", base, "v1.32.0+bbb", "")})
	if text(got) != text(want) {
		t.Errorf("same age: got %s, want %s", text(got), text(want))
	}
}

// Semantic versions come by precedence (v1.30.2 before v1.30.10), numeric build metadata
// numerically; the same precedence spelled differently alphabetically; non-semantic strings
// last, alphabetically.
func TestSortOrder(t *testing.T) {
	now := time.Now()
	var ms []*clusterv1.Machine
	for i, v := range []string{"foo", "v1.30.10", "v1.30.0+build.10", "bar", "v1.30.2", "v1.30.0", "1.30.0", "v1.30.0+build.9",
		"v1.29.0-rc.1"} {
		ms = append(ms, machine(fmt.Sprint(i), now, v, ""))
	}
	var got []string
	for _, v := range FromMachines(ms) {
		got = append(got, v.Version)
	}
	want := []string{"v1.29.0-rc.1", "1.30.0", "v1.30.0", "v1.30.0+build.9", "v1.30.0+build.10", "v1.30.2", "v1.30.10", "bar", "foo"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}

// Nodes count by kubelet version; Nodes without one are left out.
func TestFromNodes(t *testing.T) {
	node := func(v string) *corev1.Node {
		return &corev1.Node{Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: v}}}
	}
	got := FromNodes([]*corev1.Node{node("v1.33.1"), nil, node(""), node("v1.32.4"), node("v1.33.1")})
	want := []clusterv1.StatusVersion{{Version: "v1.32.4", Replicas: 1}, {Version: "v1.33.1", Replicas: 2}}
	if text(got) != text(want) {
		t.Errorf("got %s, want %s", text(got), text(want))
	}
	if got := FromNodes(nil); got != nil {
		t.Errorf("no Nodes: got %v", got)
	}
}
