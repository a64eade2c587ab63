package vsphere

import (
	"strings"

	mapiv1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/utils/ptr"
	capvv1 "sigs.k8s.io/cluster-api-provider-vsphere/api/govmomi/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
)

var _ convert.InstanceDescriber = Platform{}

// providerIDPrefix starts a vSphere providerID; the VM's BIOS UUID follows it.
const providerIDPrefix = "vsphere://"

// DescribeInstance is what the Machine API vSphere actuator records on a Machine
// (machine-api-operator pkg/controller/vsphere, reconcileMachineWithCloudState and
// setProviderStatus): no instance type label; region and zone labels from the vSphere tags
// of the categories the cloud provider config names, found on the VM's host ancestry; the
// VM's power state (poweredOn, poweredOff, suspended) as the instance state; and the VM's
// BIOS UUID, power state, clone task and conditions as a VSphereMachineProviderStatus.
//
// A VSphereMachine carries only the UUID, in its providerID (vsphere://<uuid>, as the
// actuator writes it too), so the view is a VSphereMachineProviderStatus holding the
// instance ID. The region and zone tags are read from vCenter, which CAPV records nowhere (a
// failure domain names a VSphereDeploymentZone, not those tags), CAPV records no power state
// on the VSphereMachine, and the clone task and the actuator's own conditions have no
// counterpart: they are left out.
func (Platform) DescribeInstance(infra client.Object, _ *clusterv1.Machine) convert.InstanceView {
	vm, ok := infra.(*capvv1.VSphereMachine)
	if !ok || vm == nil {
		return convert.InstanceView{}
	}
	var status any // none until there is a VM
	if id := strings.TrimPrefix(vm.Spec.ProviderID, providerIDPrefix); id != "" {
		st := &mapiv1.VSphereMachineProviderStatus{InstanceID: ptr.To(id)}
		st.APIVersion, st.Kind = mapiv1.GroupVersion.String(), "VSphereMachineProviderStatus"
		status = st
	}
	return convert.NewInstanceView("", "", "", "", status)
}
