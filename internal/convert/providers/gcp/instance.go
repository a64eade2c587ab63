package gcp

import (
	"path"

	mapiv1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/utils/ptr"
	capgv1 "sigs.k8s.io/cluster-api-provider-gcp/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
)

var _ convert.InstanceDescriber = Platform{}

// DescribeInstance is what the Machine API GCP actuator records on a Machine once it has read
// the instance back (machine-api-provider-gcp, reconcileWithCloudState and
// setMachineCloudProviderSpecifics): the providerSpec's machine type, region and zone as the
// labels, the instance's status (PROVISIONING, RUNNING, STOPPED, ...) as the instance state,
// and the instance's name and status as a GCPMachineProviderStatus. Here the machine type is
// the GCPMachine's instance type, the region the cluster's (the platform's Region, GCPCluster
// spec.region), the zone the Machine's failure domain (the zone CAPG creates the instance
// in), the status the GCPMachine's status.instanceState, which CAPG copies from the instance
// as the actuator does, and the name the last part of the GCPMachine's providerID
// (gce://<project>/<zone>/<name>).
func (p Platform) DescribeInstance(infra client.Object, machine *clusterv1.Machine) convert.InstanceView {
	gm, ok := infra.(*capgv1.GCPMachine)
	if !ok || gm == nil {
		return convert.InstanceView{}
	}
	state := ""
	if gm.Status.InstanceStatus != nil {
		state = string(*gm.Status.InstanceStatus)
	}
	var status any // none until there is an instance
	if pid := ptr.Deref(gm.Spec.ProviderID, ""); pid != "" {
		st := &mapiv1.GCPMachineProviderStatus{InstanceID: ptr.To(path.Base(pid))}
		if state != "" {
			st.InstanceState = ptr.To(state)
		}
		st.APIVersion, st.Kind = mapiv1.GroupVersion.String(), "GCPMachineProviderStatus"
		status = st
	}
	return convert.NewInstanceView(gm.Spec.InstanceType, p.Region, machine.Spec.FailureDomain, state, status)
}
