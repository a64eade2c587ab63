package sim_test

import (
	"testing"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	simv1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/convert/providers/sim"
)

func TestDescribeInstance(t *testing.T) {
	p, _ := sim.New("sim-east-1")
	m := &clusterv1.Machine{Spec: clusterv1.MachineSpec{FailureDomain: "sim-east-1b"}}
	sm := &simv1.SimMachine{Spec: simv1.SimMachineSpec{InstanceSpec: simv1.InstanceSpec{InstanceType: "s1.large"}}}
	v, ok := convert.DescribeInstance(p, sm, m)
	if !ok {
		t.Fatal("sim describes no instance")
	}
	if v.ProviderStatus != nil || v.State != "" || len(v.Labels) != 3 {
		t.Errorf("before launch: %+v, want the three labels only", v)
	}
	sm.Spec.ProviderID, sm.Status.InstanceState = "sim:///sim-east-1b/i-0001", "running"
	v, _ = convert.DescribeInstance(p, sm, m)
	want := map[string]string{convert.MachineAPIInstanceTypeLabel: "s1.large", convert.MachineAPIRegionLabel: "sim-east-1",
		convert.MachineAPIZoneLabel: "sim-east-1b"}
	for k, val := range want {
		if v.Labels[k] != val {
			t.Errorf("label %s = %q, want %q", k, v.Labels[k], val)
		}
	}
	if v.State != "running" || v.ProviderStatus == nil ||
		string(v.ProviderStatus.Raw) != `{"kind":"SimMachineProviderStatus","apiVersion":"infrastructure.machina.dev/v1alpha1","instanceID":"i-0001","instanceState":"running"}` {
		t.Errorf("state %q providerStatus %v", v.State, v.ProviderStatus)
	}
	labels, annotations := v.Apply(map[string]string{"team": "blue", convert.MachineAPIZoneLabel: "old"}, nil)
	if labels["team"] != "blue" || labels[convert.MachineAPIZoneLabel] != "sim-east-1b" || annotations[convert.MachineAPIInstanceStateAnnotation] != "running" {
		t.Errorf("Apply: labels %v annotations %v", labels, annotations)
	}
}
