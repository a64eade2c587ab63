package machine

import "testing"

func TestManagedNodeLabel(t *testing.T) {
	for key, want := range map[string]bool{
		"node-role.kubernetes.io/worker":             true,
		"node-role.kubernetes.io/infra":              true,
		"node-restriction.kubernetes.io/tier":        true,
		"pool.node-restriction.kubernetes.io/tier":   true,
		"node.cluster.x-k8s.io/pool":                 true,
		"a.b.node.cluster.x-k8s.io/x":                true,
		"team":                                       false,
		"kubernetes.io/hostname":                     false,
		"evilnode-restriction.kubernetes.io/x":       false,
		"node.cluster.x-k8s.io.example.com/x":        false,
		"topology.kubernetes.io/zone":                false,
		"cluster.x-k8s.io/cluster-name":              false,
		"node-role.kubernetes.io.example.com/worker": false,
	} {
		if got := ManagedNodeLabel(key); got != want {
			t.Errorf("ManagedNodeLabel(%q) = %v, want %v", key, got, want)
		}
	}
}
