package powervs

import (
	"strings"

	mapiv1 "github.com/openshift/api/machine/v1"
	"k8s.io/utils/ptr"
	capibmv1 "sigs.k8s.io/cluster-api-provider-ibmcloud/api/powervs/v1beta3"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
)

var _ convert.InstanceDescriber = Platform{}

// providerIDPrefix starts a PowerVS providerID, ibmpowervs://<region>/<zone>/<workspace ID>/<instance ID>
// on both sides.
const providerIDPrefix = "ibmpowervs://"

// DescribeInstance is what the Machine API PowerVS actuator records on a Machine
// (machine-api-provider-powervs, setMachineCloudProviderSpecifics and setProviderStatus): the
// instance's system type as the instance type, the region and zone of its workspace (service
// instance), the instance's status (BUILD, ACTIVE, SHUTOFF, ERROR, ...) as the instance
// state, and a PowerVSMachineProviderStatus holding the workspace ID, which the actuator
// records from its first reconcile, and once the instance exists its ID and status.
//
// Here the system type is the IBMPowerVSMachine's (CAPIBM creates the instance with it), and
// the region, zone, instance ID and state are the IBMPowerVSMachine's status.region,
// status.zone, status.instanceID and status.instanceState, which CAPIBM takes from the
// workspace and the instance as the actuator does. The workspace ID is the one in the
// providerID, else the IBMPowerVSMachine's spec.serviceInstance.id. The actuator's own
// conditions are left out.
func (Platform) DescribeInstance(infra client.Object, _ *clusterv1.Machine) convert.InstanceView {
	pm, ok := infra.(*capibmv1.IBMPowerVSMachine)
	if !ok || pm == nil {
		return convert.InstanceView{}
	}
	state := string(pm.Status.InstanceState)
	workspace := ""
	if pm.Spec.ServiceInstance != nil {
		workspace = ptr.Deref(pm.Spec.ServiceInstance.ID, "")
	}
	if parts := strings.Split(strings.TrimPrefix(pm.Spec.ProviderID, providerIDPrefix), "/"); len(parts) == 4 && parts[2] != "" {
		workspace = parts[2]
	}
	var status any // none until the workspace is known
	if workspace != "" || pm.Status.InstanceID != "" {
		st := &mapiv1.PowerVSMachineProviderStatus{}
		if workspace != "" {
			st.ServiceInstanceID = ptr.To(workspace)
		}
		if pm.Status.InstanceID != "" {
			st.InstanceID = ptr.To(pm.Status.InstanceID)
		}
		if state != "" {
			st.InstanceState = ptr.To(state)
		}
		st.APIVersion, st.Kind = mapiv1.GroupVersion.String(), "PowerVSMachineProviderStatus"
		status = st
	}
	return convert.NewInstanceView(pm.Spec.SystemType, ptr.Deref(pm.Status.Region, ""), ptr.Deref(pm.Status.Zone, ""), state, status)
}
