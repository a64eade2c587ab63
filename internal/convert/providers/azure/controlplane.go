package azure

import (
	mapiv1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	capzv1 "sigs.k8s.io/cluster-api-provider-azure/api/v1beta1"

	"github.com/machina-dev/machina/internal/convert"
)

// Control-plane Machines.
//
// OpenShift's Azure actuator adds a Machine's network interface to the load balancers its
// providerSpec names, internalLoadBalancer and publicLoadBalancer, whatever its role (role
// master only makes it fill in an empty internalLoadBalancer from the interface it finds). The
// installer names <cluster>-internal and <cluster> on masters. CAPZ decides by the Machine's
// cluster.x-k8s.io/control-plane label: with an Internal API server load balancer
// (AzureCluster spec.networkSpec.apiServerLB) it adds a control-plane interface to that one and
// to the control-plane outbound load balancer (spec.networkSpec.controlPlaneOutboundLB); with
// a Public one, to the API server load balancer with an SSH inbound NAT rule of its own, and
// to an internal load balancer only under its APIServerILB feature gate. Only the first can
// be expressed in a providerSpec, so only it converts.

// LoadBalancer is one of the AzureCluster's load balancers as CAPZ reads it, defaults applied.
type LoadBalancer struct {
	// Name is the Azure load balancer's name.
	Name string
	// BackendPool is the one backend pool CAPZ adds interfaces to.
	BackendPool string
	// Internal is true for a load balancer of type Internal.
	Internal bool
}

// The names CAPZ's AzureCluster webhook gives load balancers and pools left unnamed.
func apiServerLBOf(c *capzv1.AzureCluster) *LoadBalancer {
	lb := &LoadBalancer{}
	if s := c.Spec.NetworkSpec.APIServerLB; s != nil {
		lb.Name, lb.BackendPool, lb.Internal = s.Name, s.BackendPool.Name, s.Type == capzv1.Internal
	}
	switch {
	case lb.Name != "":
	case lb.Internal:
		lb.Name = c.Name + "-internal-lb"
	default:
		lb.Name = c.Name + "-public-lb"
	}
	if lb.BackendPool == "" {
		lb.BackendPool = lb.Name + "-backendPool"
	}
	return lb
}

func controlPlaneOutboundLBOf(c *capzv1.AzureCluster) *LoadBalancer {
	s := c.Spec.NetworkSpec.ControlPlaneOutboundLB
	if s == nil {
		return nil
	}
	lb := &LoadBalancer{Name: s.Name, BackendPool: s.BackendPool.Name}
	if lb.Name == "" {
		lb.Name = c.Name + "-outbound-lb"
	}
	if lb.BackendPool == "" {
		// CAPZ derives the pool from the default name even when the load balancer has another.
		lb.BackendPool = c.Name + "-outbound-lb-outboundBackendPool"
	}
	return lb
}

// ForControlPlane returns p converting control-plane Machines (convert.ControlPlaneInfra).
func (p Platform) ForControlPlane() convert.Platform {
	p.controlPlane = true
	return p
}

const (
	apiServerLBField = "spec.networkSpec.apiServerLB"
	cpOutboundField  = "spec.networkSpec.controlPlaneOutboundLB"
)

// ControlPlaneRole converts role master to the control-plane label when the AzureCluster's API
// server load balancer is Internal and the cluster is not dual-stack; the load balancer names
// are checked Machine by Machine.
func (p Platform) ControlPlaneRole() convert.RoleCheck {
	switch lb := p.APIServerLB; {
	case p.dualStack():
		return convert.RoleCheck{Why: p.dualStackRole()}
	case lb == nil:
		return convert.RoleCheck{Converts: true, Why: "the AzureCluster is not known, so it was not checked that CAPZ adds the control-plane Machine's interface to the load balancers the providerSpec names " +
			"(internalLoadBalancer must be the AzureCluster's Internal " + apiServerLBField + ", publicLoadBalancer its " + cpOutboundField + ")"}
	case !lb.Internal:
		return convert.RoleCheck{Why: "the AzureCluster's API server load balancer " + lb.Name + " is Public (" + apiServerLBField + ".type): CAPZ adds a control-plane Machine's interface to it " +
			"with an SSH inbound NAT rule of its own, and to an internal load balancer only under its APIServerILB feature gate, while the Machine API's actuator joins exactly the load balancers the providerSpec names; " +
			"only an Internal API server load balancer, as the installer makes, converts"}
	}
	return convert.RoleCheck{Converts: true}
}

// controlPlaneLBsToCAPZ checks that CAPZ adds a control-plane Machine's interface to the load
// balancers its providerSpec names. A Public or unknown API server load balancer is
// ControlPlaneRole's to report.
func (p Platform) controlPlaneLBsToCAPZ(ps *mapiv1.AzureMachineProviderSpec, path *field.Path, r *convert.Report) {
	lb := p.APIServerLB
	if lb == nil || !lb.Internal {
		return
	}
	if ps.InternalLoadBalancer != lb.Name {
		r.Error(field.Invalid(path.Child("internalLoadBalancer"), ps.InternalLoadBalancer, "CAPZ adds a control-plane Machine's interface to the AzureCluster's API server load balancer "+
			lb.Name+" ("+apiServerLBField+".name); the Machine's must be the same"))
	}
	out := p.ControlPlaneOutboundLB
	pp := path.Child("publicLoadBalancer")
	switch {
	case out == nil && ps.PublicLoadBalancer != "":
		r.Error(field.Invalid(pp, ps.PublicLoadBalancer, "the AzureCluster has no control-plane outbound load balancer ("+cpOutboundField+"), so CAPZ adds a control-plane Machine's interface to no public load balancer; the Machine's must be unset"))
	case out == nil:
	case ps.PublicLoadBalancer != out.Name:
		r.Error(field.Invalid(pp, ps.PublicLoadBalancer, "CAPZ adds a control-plane Machine's interface to the AzureCluster's control-plane outbound load balancer "+
			out.Name+" ("+cpOutboundField+".name); the Machine's must be the same"))
	default:
		r.Warn(pp, "CAPZ adds the interface only to the backend pool %s of %s (%s.backendPool.name), where the actuator adds it to every pool of that load balancer backing a frontend: "+
			"on a cluster the installer published externally, the installer put the masters in that load balancer's public API pool itself, and a control-plane Machine CAPZ creates joins no such pool", out.BackendPool, out.Name, cpOutboundField)
	}
}

// controlPlaneLBsToMAPI names the load balancers CAPZ adds a control-plane Machine's interface
// to. A Public API server load balancer is ControlPlaneRole's to report.
func (p Platform) controlPlaneLBsToMAPI(ps *mapiv1.AzureMachineProviderSpec, paths convert.InfraPaths, r *convert.Report) {
	lb := p.APIServerLB
	switch {
	case lb == nil:
		r.Error(field.Invalid(paths.Infra, "", "the Machine API names a master's load balancers on every Machine (internalLoadBalancer, publicLoadBalancer), and the AzureCluster's ("+
			apiServerLBField+", "+cpOutboundField+") are not known here: give the AzureCluster"))
	case lb.Internal:
		ps.InternalLoadBalancer = lb.Name
		if out := p.ControlPlaneOutboundLB; out != nil {
			ps.PublicLoadBalancer = out.Name
		}
	}
}
