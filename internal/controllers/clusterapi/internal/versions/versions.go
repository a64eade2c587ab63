// Package versions computes status.versions of MachineSets, MachineDeployments and
// MachinePools: how many replicas run each Kubernetes version.
//
// The rules follow Cluster API v1.14: a Machine's version is the kubelet version its Node
// reports (status.nodeInfo.kubeletVersion) and, before it has a Node, its spec.version;
// Machines without either are left out; Machines being deleted count. Versions are listed
// lowest first: semantic versions (a leading "v" is allowed) ordered by precedence, build
// metadata included, then anything else alphabetically. Two versions whose order cannot be
// told (they differ only in non-numeric build metadata, such as commit hashes) keep the order
// in which they were first seen; for Machines that is their creation order.
package versions

import (
	"sort"

	"github.com/blang/semver/v4"
	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capiversion "sigs.k8s.io/cluster-api/util/version"
)

// Of is the version a Machine counts under: its Node's kubelet version, else spec.version.
// Empty when it has neither.
func Of(m *clusterv1.Machine) string {
	if m.Status.NodeInfo != nil && m.Status.NodeInfo.KubeletVersion != "" {
		return m.Status.NodeInfo.KubeletVersion
	}
	return m.Spec.Version
}

// FromMachines counts the Machines by version. Nil when none has a version.
func FromMachines(machines []*clusterv1.Machine) []clusterv1.StatusVersion {
	byAge := make([]*clusterv1.Machine, 0, len(machines))
	for _, m := range machines {
		if m != nil {
			byAge = append(byAge, m)
		}
	}
	sort.SliceStable(byAge, func(i, j int) bool {
		a, b := byAge[i], byAge[j]
		if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.Name < b.Name
		}
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	})
	var c counter
	for _, m := range byAge {
		c.add(Of(m), 1)
	}
	return c.sorted()
}

// FromNodes counts the Nodes by kubelet version, in the order given. Nil when none reports
// one.
func FromNodes(nodes []*corev1.Node) []clusterv1.StatusVersion {
	var c counter
	for _, n := range nodes {
		if n != nil {
			c.add(n.Status.NodeInfo.KubeletVersion, 1)
		}
	}
	return c.sorted()
}

// counter sums replicas by version and remembers the order versions were first seen in.
type counter struct {
	index map[string]int
	list  []clusterv1.StatusVersion
}

func (c *counter) add(version string, replicas int32) {
	if version == "" {
		return
	}
	if i, ok := c.index[version]; ok {
		c.list[i].Replicas += replicas
		return
	}
	if c.index == nil {
		c.index = map[string]int{}
	}
	c.index[version] = len(c.list)
	c.list = append(c.list, clusterv1.StatusVersion{Version: version, Replicas: replicas})
}

// sorted is the list lowest version first; a stable sort keeps the first-seen order where
// less cannot decide.
func (c *counter) sorted() []clusterv1.StatusVersion {
	if len(c.list) == 0 {
		return nil
	}
	out := append([]clusterv1.StatusVersion(nil), c.list...)
	sort.SliceStable(out, func(i, j int) bool { return less(out[i].Version, out[j].Version) })
	return out
}

// less orders two distinct versions: semantic versions first, by precedence with build
// metadata compared (numeric identifiers numerically, others only for equality), equal
// precedence spelled differently alphabetically ("1.30.0" before "v1.30.0"); other strings
// after them, alphabetically. It is false both ways when the order cannot be told.
func less(a, b string) bool {
	va, errA := semver.ParseTolerant(a)
	vb, errB := semver.ParseTolerant(b)
	switch {
	case errA == nil && errB == nil:
		switch capiversion.Compare(va, vb, capiversion.WithBuildTags()) {
		case -1:
			return true
		case 0:
			return a < b
		default: // 1: greater; 2: differing non-numeric build metadata, no order
			return false
		}
	case errA == nil:
		return true
	case errB == nil:
		return false
	default:
		return a < b
	}
}
