package sim

import (
	"path"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	simv1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/convert"
)

var _ convert.InstanceDescriber = Platform{}

// DescribeInstance is what the simulated Machine API actuator records on a Machine
// (simactuator): the instance type, the cluster's region, the Machine's failure domain as the
// zone, and the SimMachine's instance and state as a SimMachineProviderStatus.
func (p Platform) DescribeInstance(infra client.Object, machine *clusterv1.Machine) convert.InstanceView {
	sm, ok := infra.(*simv1.SimMachine)
	if !ok || sm == nil {
		return convert.InstanceView{}
	}
	var status any // none until there is an instance
	if id := sm.Spec.ProviderID; id != "" {
		st := &simv1.SimMachineProviderStatus{InstanceID: path.Base(id), InstanceState: sm.Status.InstanceState}
		st.APIVersion, st.Kind = simv1.GroupVersion.String(), "SimMachineProviderStatus"
		status = st
	}
	return convert.NewInstanceView(sm.Spec.InstanceType, p.Region, machine.Spec.FailureDomain, sm.Status.InstanceState, status)
}
