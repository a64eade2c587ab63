package azure

import (
	configv1 "github.com/openshift/api/config/v1"
	mapiv1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/machina-dev/machina/internal/convert"
)

// Dual-stack clusters.
//
// The Infrastructure's status.platformStatus.azure.ipFamily (DualStackIPv4Primary,
// DualStackIPv6Primary) says the cluster is dual-stack. Nothing in the providerSpec says so:
// OpenShift's Azure actuator looks at the Machine's subnet, and when it has an IPv6 prefix (as
// every subnet of a dual-stack cluster has) gives the interface a second, IPv6 IP
// configuration (pipConfig-v6). It puts that configuration in the backend pools of the load
// balancers the providerSpec names that serve an IPv6 frontend (the installer adds
// <cluster>-ipv6 and <cluster>-outbound-lb-outboundBackendPool-ipv6 to <cluster>, and
// <cluster>-internal-ipv6 to <cluster>-internal).
//
// CAPZ v1.26 gives every interface an IPv6 IP configuration (ipConfigv6) when the AzureCluster's
// virtual network lists an IPv6 CIDR (spec.networkSpec.vnet.cidrBlocks), and puts it in no
// backend pool: only the IPv4 configuration joins the one pool of each load balancer. So a
// Machine converts on a dual-stack cluster when the AzureCluster lists an IPv6 CIDR and the
// Machine joins no load balancer; the configuration's other name is a difference nothing reads.

const (
	ipFamilyField = "Infrastructure status.platformStatus.azure.ipFamily"
	vnetCIDRField = "AzureCluster spec.networkSpec.vnet.cidrBlocks"
)

// dualStack reports whether the Infrastructure's ipFamily makes the cluster dual-stack.
func (p Platform) dualStack() bool {
	return p.IPFamily == configv1.DualStackIPv4Primary || p.IPFamily == configv1.DualStackIPv6Primary
}

func (p Platform) onDualStack() string {
	return "on this dual-stack cluster (" + ipFamilyField + " " + string(p.IPFamily) + ") "
}

// checkIPv6Config compares the IPv6 IP configuration the actuator and CAPZ give the interface
// in subnet; path is the field that names the subnet in the object being converted.
func (p Platform) checkIPv6Config(subnet string, path *field.Path, r *convert.Report) {
	const (
		actuator = "the actuator gives the interface an IPv6 IP configuration (its subnet has an IPv6 prefix)"
		capz     = "CAPZ gives every interface one only when the AzureCluster's virtual network lists an IPv6 CIDR (" + vnetCIDRField + ")"
	)
	vnetV6 := p.VnetIPv6
	switch {
	case vnetV6 == nil && p.dualStack():
		r.Warn(path, "not checked: %s%s; %s, and the AzureCluster is not known here", p.onDualStack(), actuator, capz)
	case vnetV6 == nil:
	case !*vnetV6 && p.dualStack():
		r.Error(field.Invalid(path, subnet, p.onDualStack()+actuator+"; "+capz+", and this AzureCluster's lists none, so the Machine would have no IPv6 address"))
	case !*vnetV6:
	case p.IPFamily == "":
		r.Warn(path, "not checked: the AzureCluster's virtual network lists an IPv6 CIDR (%s), so CAPZ gives every interface an IPv6 IP configuration; "+
			"the actuator gives one only in a subnet with an IPv6 prefix, as a dual-stack cluster's are, and the cluster's IP family (%s) is not known here: give the Infrastructure", vnetCIDRField, ipFamilyField)
	case !p.dualStack():
		r.Error(field.Invalid(path, subnet, "the AzureCluster's virtual network lists an IPv6 CIDR ("+vnetCIDRField+"), so CAPZ would give the interface an IPv6 IP configuration, "+
			"which the actuator gives only in a subnet with an IPv6 prefix; the cluster is not dual-stack ("+ipFamilyField+" "+string(p.IPFamily)+")"))
	}
}

// dualStackLBError is the error for a load balancer lb that the Machine's interface joins on a
// dual-stack cluster; path is the field that names it, source where lb comes from when that is
// not path.
func (p Platform) dualStackLBError(path *field.Path, lb, source string) *field.Error {
	return field.Invalid(path, lb, p.onDualStack()+"the actuator also puts the interface's IPv6 IP configuration in the backend pools of "+lb+source+
		" that serve an IPv6 frontend (the installer adds <cluster>-ipv6 and <cluster>-outbound-lb-outboundBackendPool-ipv6 to <cluster>, <cluster>-internal-ipv6 to <cluster>-internal); "+
		"CAPZ puts only the IPv4 configuration in one backend pool of each load balancer and its IPv6 configuration in none, "+
		"so the Machine would lose IPv6 load balancing and outbound traffic through "+lb)
}

// dualStackLBsToCAPZ refuses, on a dual-stack cluster, the load balancers a worker's
// providerSpec names (a control-plane Machine is ControlPlaneRole's to refuse).
func (p Platform) dualStackLBsToCAPZ(ps *mapiv1.AzureMachineProviderSpec, path *field.Path, r *convert.Report) {
	if p.dualStack() && ps.PublicLoadBalancer != "" {
		r.Error(p.dualStackLBError(path.Child("publicLoadBalancer"), ps.PublicLoadBalancer, ""))
	}
}

// dualStackToMAPI checks, going back, the IPv6 IP configuration and the load balancer the
// Machine API would name: the AzureCluster's node outbound load balancer.
func (p Platform) dualStackToMAPI(ps *mapiv1.AzureMachineProviderSpec, paths convert.InfraPaths, r *convert.Report) {
	nic := paths.Infra.Child("networkInterfaces").Index(0)
	if ps.Subnet != "" {
		p.checkIPv6Config(ps.Subnet, nic.Child("subnetName"), r)
	}
	if p.dualStack() && !p.controlPlane && ps.PublicLoadBalancer != "" {
		r.Error(p.dualStackLBError(nic, ps.PublicLoadBalancer, " (the AzureCluster's spec.networkSpec.nodeOutboundLB, which converting back names in publicLoadBalancer)"))
	}
}

// dualStackRole is why control-plane Machines do not convert on a dual-stack cluster: they
// always join the API server's internal load balancer, and the IPv6 API frontend's pool.
func (p Platform) dualStackRole() string {
	return p.onDualStack() + "the actuator puts a control-plane Machine's IPv6 IP configuration in the IPv6 backend pools of the load balancers its providerSpec names " +
		"(the installer's <cluster>-internal-ipv6 behind the internal API server's IPv6 frontend, and <cluster>-ipv6 and <cluster>-outbound-lb-outboundBackendPool-ipv6 on <cluster>), " +
		"while CAPZ puts its IPv6 IP configuration in no backend pool, so a control plane CAPZ replaces would no longer serve the API over IPv6"
}
