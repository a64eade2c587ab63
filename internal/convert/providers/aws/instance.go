package aws

import (
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/utils/ptr"
	capav1 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
)

var _ convert.InstanceDescriber = Platform{}

// DescribeInstance is what the Machine API AWS actuator records on a Machine: the instance
// type, the cluster's region, the Machine's failure domain (the availability zone CAPA
// launches in) as the zone, and the AWSMachine's instance ID and state as an
// AWSMachineProviderStatus.
func (p Platform) DescribeInstance(infra client.Object, machine *clusterv1.Machine) convert.InstanceView {
	am, ok := infra.(*capav1.AWSMachine)
	if !ok || am == nil {
		return convert.InstanceView{}
	}
	state := ""
	if am.Status.InstanceState != nil {
		state = string(*am.Status.InstanceState)
	}
	var status any // none until there is an instance
	if id := ptr.Deref(am.Spec.InstanceID, ""); id != "" {
		st := &machinev1beta1.AWSMachineProviderStatus{InstanceID: ptr.To(id)}
		if state != "" {
			st.InstanceState = ptr.To(state)
		}
		st.APIVersion, st.Kind = machinev1beta1.GroupVersion.String(), "AWSMachineProviderStatus"
		status = st
	}
	return convert.NewInstanceView(am.Spec.InstanceType, p.Region, machine.Spec.FailureDomain, state, status)
}
