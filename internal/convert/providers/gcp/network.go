package gcp

import (
	mapiv1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	capgv1 "sigs.k8s.io/cluster-api-provider-gcp/api/v1beta1"

	"github.com/machina-dev/machina/internal/convert"
)

// The network. CAPG gives every instance one interface, on the GCPCluster's network, in a
// subnetwork of the cluster's region it may name; the Machine API names network, subnetwork
// and the network's project (a shared VPC's host project) on each interface.

const giveGCPCluster = "give the GCPCluster (--infrastructure)"

func (p Platform) networkToCAPG(ps *mapiv1.GCPMachineProviderSpec, out *capgv1.GCPMachineSpec, path *field.Path, r *convert.Report) {
	switch n := len(ps.NetworkInterfaces); {
	case n == 0:
		r.Error(field.Required(path, "CAPG gives every instance one interface, on the GCPCluster's network"))
		return
	case n > 1:
		r.Error(field.TooMany(path, n, 1))
		return
	case ps.NetworkInterfaces[0] == nil:
		r.Error(field.Required(path.Index(0), ""))
		return
	}
	nic := ps.NetworkInterfaces[0]
	np := path.Index(0)
	if nic.Network == "" {
		r.Error(field.Required(np.Child("network"), "CAPG puts the interface on the GCPCluster's network; name it"))
	}
	project := nic.ProjectID
	if project == "" {
		project = p.Project // another project of the instance's is refused with it
	}
	switch known := p.Network; {
	case known == nil:
		r.Warn(np, "not checked: the GCPCluster is not known here. CAPG puts every instance on the GCPCluster's spec.network, not on one per Machine; %s to check it and to convert the Machine back", giveGCPCluster)
	case nic.Network != "" && nic.Network != known.Name:
		r.Error(field.Invalid(np.Child("network"), nic.Network, "CAPG puts every instance on the GCPCluster's network, "+known.Name))
	case project != "" && project != known.Project:
		r.Error(field.Invalid(np.Child("projectID"), project, "CAPG puts every instance on the GCPCluster's network, in project "+known.Project))
	case nic.ProjectID != "" && nic.ProjectID == p.vmProject(ps):
		r.Warn(np.Child("projectID"), "dropped: it repeats the instance's project")
	}
	if nic.Subnetwork != "" {
		out.Subnet = ptr.To(nic.Subnetwork)
	}
	if nic.PublicIP {
		out.PublicIP = ptr.To(true)
	}
}

// networkToMAPI describes CAPG's one interface: the GCPCluster's network, the subnetwork.
func (p Platform) networkToMAPI(s *capgv1.GCPMachineSpec, paths convert.InfraPaths, r *convert.Report) []*mapiv1.GCPNetworkInterface {
	path := paths.Infra
	if len(s.AliasIPRanges) > 0 {
		r.Unsupported(path.Child("aliasIPRanges"), len(s.AliasIPRanges), convert.MachineAPI)
	}
	nic := &mapiv1.GCPNetworkInterface{Subnetwork: ptr.Deref(s.Subnet, "")}
	switch v := s.PublicIP; {
	case v == nil:
	case *v:
		nic.PublicIP = true
	default:
		r.Warn(path.Child("publicIP"), "dropped: false is the default")
	}
	if p.Network == nil {
		r.Error(field.Invalid(path, "", "the Machine API names the instance's network, which is the GCPCluster's spec.network; the GCPCluster is not known here: "+giveGCPCluster))
		return nil
	}
	nic.Network = p.Network.Name
	if p.Network.Project != p.Project {
		nic.ProjectID = p.Network.Project
	}
	return []*mapiv1.GCPNetworkInterface{nic}
}
