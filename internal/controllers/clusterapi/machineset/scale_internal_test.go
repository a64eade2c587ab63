package machineset

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

func machineAt(name string, age time.Duration, mutate func(*clusterv1.Machine)) *clusterv1.Machine {
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Now().Add(-age))}}
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: "node-" + name}
	m.Status.Conditions = []metav1.Condition{{Type: clusterv1.MachineReadyCondition, Status: metav1.ConditionTrue}}
	if mutate != nil {
		mutate(m)
	}
	return m
}

func names(ms []*clusterv1.Machine) string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return strings.Join(out, ",")
}

func TestChooseVictims(t *testing.T) {
	old := machineAt("old", 3*time.Hour, nil)
	mid := machineAt("mid", 2*time.Hour, nil)
	young := machineAt("young", time.Hour, nil)
	marked := machineAt("marked", 2*time.Hour, func(m *clusterv1.Machine) {
		m.Annotations = map[string]string{clusterv1.DeleteMachineAnnotation: ""}
	})
	sick := machineAt("sick", 4*time.Hour, func(m *clusterv1.Machine) {
		m.Status.Conditions = append(m.Status.Conditions, metav1.Condition{Type: clusterv1.MachineHealthCheckSucceededCondition, Status: metav1.ConditionFalse})
	})
	pending := machineAt("pending", 5*time.Hour, func(m *clusterv1.Machine) {
		m.Status.NodeRef = clusterv1.MachineNodeReference{}
		m.Status.Conditions = nil
	})
	for _, tc := range []struct {
		order clusterv1.MachineSetDeletionOrder
		in    []*clusterv1.Machine
		n     int
		want  string
	}{
		{clusterv1.OldestMachineSetDeletionOrder, []*clusterv1.Machine{young, old, mid}, 2, "old,mid"},
		{clusterv1.NewestMachineSetDeletionOrder, []*clusterv1.Machine{old, young, mid}, 2, "young,mid"},
		{clusterv1.NewestMachineSetDeletionOrder, []*clusterv1.Machine{old, young, marked}, 1, "marked"},
		{clusterv1.NewestMachineSetDeletionOrder, []*clusterv1.Machine{young, sick, marked}, 2, "marked,sick"},
		// Not ready ranks first only in the Random order.
		{clusterv1.RandomMachineSetDeletionOrder, []*clusterv1.Machine{young, old, pending}, 1, "pending"},
		{"", []*clusterv1.Machine{young, old, pending, sick}, 2, "sick,pending"},
		{clusterv1.NewestMachineSetDeletionOrder, []*clusterv1.Machine{young, pending}, 1, "young"},
		{clusterv1.OldestMachineSetDeletionOrder, []*clusterv1.Machine{old}, 3, "old"},
	} {
		if got := names(chooseVictims(tc.in, tc.n, tc.order)); got != tc.want {
			t.Errorf("order %q from %s: got %s, want %s", tc.order, names(tc.in), got, tc.want)
		}
	}
}

func TestMachineName(t *testing.T) {
	ms := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "workers"}, Spec: clusterv1.MachineSetSpec{ClusterName: "prod"}}
	if n := machineName(ms); !strings.HasPrefix(n, "workers-") || len(n) != len("workers-")+5 {
		t.Errorf("default name %q", n)
	}
	ms.Spec.MachineNaming.Template = "{{ .cluster.name }}-{{ .machineSet.name }}-{{ .random }}"
	if n := machineName(ms); !strings.HasPrefix(n, "prod-workers-") {
		t.Errorf("templated name %q", n)
	}
	ms.Spec.MachineNaming.Template = "{{ .machineSet.name }}"
	if n := machineName(ms); !strings.HasPrefix(n, "workers-") || len(n) != len("workers-")+5 {
		t.Errorf("a template without random still gets a random suffix: %q", n)
	}
	ms.Name = strings.Repeat("x", 70)
	ms.Spec.MachineNaming.Template = ""
	if n := machineName(ms); len(n) > 63 {
		t.Errorf("name too long: %d", len(n))
	}
	// A name too long for a label value is hashed exactly as Cluster API's
	// util/labels/format does, since providers and the autoscaler select by this label.
	m := newMachine(ms, &cloneSource{target: clusterv1.ContractVersionedObjectReference{Kind: "SimMachine"}}, nil)
	if v := m.Labels[clusterv1.MachineSetNameLabel]; v != "hash_d_PJfQ_z" {
		t.Errorf("set-name label of a 70-character name: %q, want Cluster API's hash_d_PJfQ_z", v)
	}
}
