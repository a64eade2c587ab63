package openstack

import (
	"k8s.io/utils/ptr"
	capov1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"

	"github.com/machina-dev/machina/internal/convert"
)

// APIServerIngress is what CAPO does, by its OpenStackCluster, to bring the server of a
// control-plane Machine (cluster.x-k8s.io/control-plane) behind the API server. OpenShift's
// OpenStack actuator does neither for a Machine of role master: the API is on the cluster's
// virtual IP, which every port allows (see Platform.VIPs).
type APIServerIngress struct {
	// LoadBalancer: CAPO adds each control-plane server as a member of the OpenStackCluster's
	// API server load balancer (spec.apiServerLoadBalancer.enabled).
	LoadBalancer bool
	// FloatingIP: CAPO associates the API server floating IP with each control-plane server's
	// port (unless spec.disableAPIServerFloatingIP or spec.disableExternalNetwork).
	FloatingIP bool
}

// APIServerIngressOf reads an OpenStackCluster's API server ingress.
func APIServerIngressOf(c *capov1.OpenStackCluster) *APIServerIngress {
	return &APIServerIngress{
		LoadBalancer: c.Spec.APIServerLoadBalancer.IsEnabled(),
		FloatingIP:   !ptr.Deref(c.Spec.DisableAPIServerFloatingIP, false) && !ptr.Deref(c.Spec.DisableExternalNetwork, false),
	}
}

// WithOpenStackCluster returns p with what the OpenStackCluster says about control-plane
// Machines.
func (p Platform) WithOpenStackCluster(c *capov1.OpenStackCluster) Platform {
	p.APIServer = APIServerIngressOf(c)
	return p
}

// ControlPlaneRole converts role master to the control-plane label when CAPO does nothing for a
// control-plane Machine that the Machine API's actuator does not do for a master either: no
// load balancer membership, no floating IP (the installer's OpenStackCluster).
func (p Platform) ControlPlaneRole() convert.RoleCheck {
	switch {
	case p.APIServer == nil:
		return convert.RoleCheck{Converts: true, Why: "the OpenStackCluster is not known, so it was not checked that CAPO puts control-plane Machines behind no load balancer or floating IP of its own (it does not when the OpenStackCluster's spec.apiServerLoadBalancer is disabled and spec.disableAPIServerFloatingIP is true, as the installer makes it)"}
	case p.APIServer.LoadBalancer:
		return convert.RoleCheck{Why: "CAPO adds control-plane Machines to the OpenStackCluster's API server load balancer (spec.apiServerLoadBalancer.enabled), the Machine API's actuator adds a master to none (the API is on the cluster's virtual IP); disable it to convert them"}
	case p.APIServer.FloatingIP:
		return convert.RoleCheck{Why: "CAPO associates the API server floating IP with a control-plane Machine's port, the Machine API's actuator attaches none to a master; set the OpenStackCluster's spec.disableAPIServerFloatingIP to true (as the installer does) to convert them"}
	}
	return convert.RoleCheck{Converts: true}
}
