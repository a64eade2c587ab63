package azure

import (
	"strings"

	mapiv1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/utils/ptr"
	capzv1 "sigs.k8s.io/cluster-api-provider-azure/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
)

var _ convert.InstanceDescriber = Platform{}

// providerIDPrefix starts a CAPZ providerID; the VM's resource ID follows it.
const providerIDPrefix = "azure://"

// DescribeInstance is what the Machine API Azure actuator records on a Machine from the VM it
// reads back (machine-api-provider-azure, setMachineCloudProviderSpecifics and Update): the
// VM size as the instance type, the VM's location as the region, its zones (joined with ",")
// as the zone, the VM state as the instance state, and the VM's resource ID and state as an
// AzureMachineProviderStatus. Here the VM size is the AzureMachine's, the location the
// cluster's (the platform's Location, AzureCluster spec.location) and the zone the Machine's
// failure domain, the one zone CAPZ creates the VM in (none for a VM without zones).
//
// The actuator's VM state is the provisioning state until that has succeeded and the power
// state (Running, Stopped, Deallocated, ...) after. CAPZ records only the provisioning state
// (AzureMachine status.vmState), so the state is that while it is not Succeeded and unknown
// ("", left out) once it is. The VM ID is the resource ID from the AzureMachine's providerID,
// where CAPZ writes the resource group in lower case.
func (p Platform) DescribeInstance(infra client.Object, machine *clusterv1.Machine) convert.InstanceView {
	am, ok := infra.(*capzv1.AzureMachine)
	if !ok || am == nil {
		return convert.InstanceView{}
	}
	state := ""
	if vs := ptr.Deref(am.Status.VMState, ""); vs != "" && vs != capzv1.Succeeded {
		state = string(vs)
	}
	var status any // none until there is a VM
	if id := strings.TrimPrefix(ptr.Deref(am.Spec.ProviderID, ""), providerIDPrefix); id != "" {
		st := &mapiv1.AzureMachineProviderStatus{VMID: ptr.To(id)}
		if state != "" {
			st.VMState = ptr.To(mapiv1.AzureVMState(state))
		}
		st.APIVersion, st.Kind = mapiv1.GroupVersion.String(), "AzureMachineProviderStatus"
		status = st
	}
	return convert.NewInstanceView(am.Spec.VMSize, p.Location, machine.Spec.FailureDomain, state, status)
}
