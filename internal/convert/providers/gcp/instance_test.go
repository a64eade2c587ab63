package gcp_test

import (
	"testing"

	"k8s.io/utils/ptr"
	capgv1 "sigs.k8s.io/cluster-api-provider-gcp/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/convert/providers/gcp"
)

func TestDescribeInstance(t *testing.T) {
	p, _ := gcp.New("us-central1")
	m := &clusterv1.Machine{Spec: clusterv1.MachineSpec{FailureDomain: "us-central1-b"}}
	gm := &capgv1.GCPMachine{Spec: capgv1.GCPMachineSpec{InstanceType: "n2-standard-4"}}
	v, ok := convert.DescribeInstance(p, gm, m)
	if !ok {
		t.Fatal("gcp describes no instance")
	}
	want := map[string]string{convert.MachineAPIInstanceTypeLabel: "n2-standard-4", convert.MachineAPIRegionLabel: "us-central1",
		convert.MachineAPIZoneLabel: "us-central1-b"}
	if v.ProviderStatus != nil || v.State != "" || len(v.Labels) != len(want) {
		t.Errorf("no instance yet: %+v, want the three labels only", v)
	}
	gm.Spec.ProviderID = ptr.To("gce://openshift-ci/us-central1-b/ci-worker-b-x7k2p")
	gm.Status.InstanceStatus = ptr.To(capgv1.InstanceStatusRunning)
	v, _ = convert.DescribeInstance(p, gm, m)
	for k, val := range want {
		if v.Labels[k] != val {
			t.Errorf("label %s = %q, want %q", k, v.Labels[k], val)
		}
	}
	if v.State != "RUNNING" || v.ProviderStatus == nil ||
		string(v.ProviderStatus.Raw) != `{"kind":"GCPMachineProviderStatus","apiVersion":"machine.openshift.io/v1beta1","metadata":{},"instanceId":"ci-worker-b-x7k2p","instanceState":"RUNNING"}` {
		t.Errorf("state %q providerStatus %v", v.State, v.ProviderStatus)
	}
	// CAPG has set the providerID but not yet read the instance's status back.
	gm.Status.InstanceStatus = nil
	if v, _ = convert.DescribeInstance(p, gm, m); v.State != "" || v.ProviderStatus == nil ||
		string(v.ProviderStatus.Raw) != `{"kind":"GCPMachineProviderStatus","apiVersion":"machine.openshift.io/v1beta1","metadata":{},"instanceId":"ci-worker-b-x7k2p"}` {
		t.Errorf("no status: state %q providerStatus %v", v.State, v.ProviderStatus)
	}
	if v := p.DescribeInstance(&capgv1.GCPMachineTemplate{}, m); len(v.Labels) != 0 || v.State != "" || v.ProviderStatus != nil {
		t.Errorf("view of a GCPMachineTemplate: %+v, want none", v)
	}
}
