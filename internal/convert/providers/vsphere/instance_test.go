package vsphere_test

import (
	"testing"

	capvv1 "sigs.k8s.io/cluster-api-provider-vsphere/api/govmomi/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/convert/providers/vsphere"
)

func TestDescribeInstance(t *testing.T) {
	p := vsphere.New()
	m := &clusterv1.Machine{}
	vm := &capvv1.VSphereMachine{Spec: capvv1.VSphereMachineSpec{VirtualMachineCloneSpec: capvv1.VirtualMachineCloneSpec{NumCPUs: 4}}}
	v, ok := convert.DescribeInstance(p, vm, m)
	if !ok {
		t.Fatal("vsphere describes no instance")
	}
	if len(v.Labels) != 0 || v.State != "" || v.ProviderStatus != nil {
		t.Errorf("no VM yet: %+v, want nothing", v)
	}
	vm.Spec.ProviderID = "vsphere://4212f8a1-5f3c-7b1e-9d4a-0c6e2f81b3a7"
	v, _ = convert.DescribeInstance(p, vm, m)
	if len(v.Labels) != 0 || v.State != "" || v.ProviderStatus == nil ||
		string(v.ProviderStatus.Raw) != `{"kind":"VSphereMachineProviderStatus","apiVersion":"machine.openshift.io/v1beta1","instanceId":"4212f8a1-5f3c-7b1e-9d4a-0c6e2f81b3a7"}` {
		t.Errorf("view %+v providerStatus %v", v, v.ProviderStatus)
	}
	// The actuator's labels and annotation have no CAPV source: the view removes stale ones.
	labels, annotations := v.Apply(map[string]string{convert.MachineAPIZoneLabel: "old", "team": "blue"}, map[string]string{convert.MachineAPIInstanceStateAnnotation: "poweredOn"})
	if _, ok := labels[convert.MachineAPIZoneLabel]; ok || labels["team"] != "blue" || len(annotations) != 0 {
		t.Errorf("Apply: labels %v annotations %v", labels, annotations)
	}
	if v := p.DescribeInstance(&capvv1.VSphereMachineTemplate{}, m); len(v.Labels) != 0 || v.State != "" || v.ProviderStatus != nil {
		t.Errorf("view of a VSphereMachineTemplate: %+v, want none", v)
	}
}
