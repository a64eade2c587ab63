package openstack

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	capov1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
)

var _ convert.InstanceDescriber = Platform{}

// DescribeInstance is what the Machine API OpenStack actuator records on a Machine once the
// server exists (machine-api-provider-openstack, reconcile, setMachineLabels and
// setMachineAnnotations): the providerSpec's flavor as the instance type, the region of the
// clouds.yaml entry it authenticates with, the server's availability zone as the zone, and
// the server's status (ACTIVE, BUILD, ERROR, SHUTOFF, ...) as the instance state. It writes
// no providerStatus, so there is none here either; nor is its openstack-resourceId
// annotation (the server ID) part of the view.
//
// Here the flavor is the OpenStackMachine's flavor (none when it names its flavor by ID
// only), the region the OpenStackMachine's identityRef region, which overrides the clouds.yaml
// one when set (left out otherwise: the clouds secret is not read here), and the zone the
// Machine's failure domain, the availability zone CAPO creates the server in (left out when
// there is none and Nova picks the zone). CAPO no longer copies the server's status to the
// OpenStackMachine (status.instanceState is kept on its OpenStackServer), but its
// InstanceReady condition follows it: True only while the server is ACTIVE, False with reason
// InstanceStateError while it is in ERROR. Those two are the state; any other is unknown.
func (p Platform) DescribeInstance(infra client.Object, machine *clusterv1.Machine) convert.InstanceView {
	om, ok := infra.(*capov1.OpenStackMachine)
	if !ok || om == nil {
		return convert.InstanceView{}
	}
	region := ""
	if om.Spec.IdentityRef != nil {
		region = om.Spec.IdentityRef.Region
	}
	return convert.NewInstanceView(ptr.Deref(om.Spec.Flavor, ""), region, machine.Spec.FailureDomain, serverState(om), nil)
}

// serverState is the server status an OpenStackMachine's InstanceReady condition tells, ""
// when it tells none.
func serverState(om *capov1.OpenStackMachine) string {
	for _, c := range om.Status.Conditions {
		if c.Type != capov1.InstanceReadyCondition {
			continue
		}
		switch {
		case c.Status == corev1.ConditionTrue:
			return string(capov1.InstanceStateActive)
		case c.Status == corev1.ConditionFalse && c.Reason == capov1.InstanceStateErrorReason:
			return string(capov1.InstanceStateError)
		}
	}
	return ""
}
