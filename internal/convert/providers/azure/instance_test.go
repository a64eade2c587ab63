package azure_test

import (
	"testing"

	"k8s.io/utils/ptr"
	capzv1 "sigs.k8s.io/cluster-api-provider-azure/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/convert/providers/azure"
)

func TestDescribeInstance(t *testing.T) {
	p, _ := azure.New("centralus")
	const vmID = "/subscriptions/53b8f551-f0fc-4bea-8cba-6d1fefd54c8a/resourceGroups/ci-rg/providers/Microsoft.Compute/virtualMachines/ci-worker-1"
	type want struct {
		labels map[string]string
		state  string
		status string // the providerStatus JSON, "" for none
	}
	all := map[string]string{convert.MachineAPIInstanceTypeLabel: "Standard_D4s_v3", convert.MachineAPIRegionLabel: "centralus", convert.MachineAPIZoneLabel: "2"}
	for _, tc := range []struct {
		name          string
		providerID    string
		vmState       capzv1.ProvisioningState
		failureDomain string
		want          want
	}{
		{name: "no VM yet", failureDomain: "2", want: want{labels: all}},
		{name: "creating", providerID: "azure://" + vmID, vmState: capzv1.Creating, failureDomain: "2", want: want{labels: all, state: "Creating",
			status: `{"kind":"AzureMachineProviderStatus","apiVersion":"machine.openshift.io/v1beta1","metadata":{},"vmId":"` + vmID + `","vmState":"Creating"}`}},
		{name: "succeeded: the power state is not known", providerID: "azure://" + vmID, vmState: capzv1.Succeeded, failureDomain: "2", want: want{labels: all,
			status: `{"kind":"AzureMachineProviderStatus","apiVersion":"machine.openshift.io/v1beta1","metadata":{},"vmId":"` + vmID + `"}`}},
		{name: "failed, no zones", providerID: "azure://" + vmID, vmState: capzv1.Failed, want: want{state: "Failed",
			labels: map[string]string{convert.MachineAPIInstanceTypeLabel: "Standard_D4s_v3", convert.MachineAPIRegionLabel: "centralus"},
			status: `{"kind":"AzureMachineProviderStatus","apiVersion":"machine.openshift.io/v1beta1","metadata":{},"vmId":"` + vmID + `","vmState":"Failed"}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			am := &capzv1.AzureMachine{Spec: capzv1.AzureMachineSpec{VMSize: "Standard_D4s_v3"}}
			if tc.providerID != "" {
				am.Spec.ProviderID = ptr.To(tc.providerID)
			}
			if tc.vmState != "" {
				am.Status.VMState = ptr.To(tc.vmState)
			}
			m := &clusterv1.Machine{Spec: clusterv1.MachineSpec{FailureDomain: tc.failureDomain}}
			v, ok := convert.DescribeInstance(p, am, m)
			if !ok {
				t.Fatal("azure describes no instance")
			}
			if len(v.Labels) != len(tc.want.labels) {
				t.Errorf("labels %v, want %v", v.Labels, tc.want.labels)
			}
			for k, val := range tc.want.labels {
				if v.Labels[k] != val {
					t.Errorf("label %s = %q, want %q", k, v.Labels[k], val)
				}
			}
			if v.State != tc.want.state {
				t.Errorf("state %q, want %q", v.State, tc.want.state)
			}
			switch {
			case tc.want.status == "" && v.ProviderStatus != nil:
				t.Errorf("providerStatus %s, want none", v.ProviderStatus.Raw)
			case tc.want.status != "" && (v.ProviderStatus == nil || string(v.ProviderStatus.Raw) != tc.want.status):
				t.Errorf("providerStatus %v, want %s", v.ProviderStatus, tc.want.status)
			}
		})
	}
}

func TestDescribeInstanceOtherInfra(t *testing.T) {
	p, _ := azure.New("centralus")
	v := p.DescribeInstance(&capzv1.AzureMachineTemplate{}, &clusterv1.Machine{})
	if len(v.Labels) != 0 || v.State != "" || v.ProviderStatus != nil {
		t.Errorf("view of an AzureMachineTemplate: %+v, want none", v)
	}
}
