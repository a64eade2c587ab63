package powervs

import (
	"reflect"

	mapiv1 "github.com/openshift/api/machine/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	capibmv1 "sigs.k8s.io/cluster-api-provider-ibmcloud/api/powervs/v1beta3"

	"github.com/machina-dev/machina/internal/convert"
)

// capibm is CAPIBM's name in messages.
const capibm = "CAPIBM"

// ToInfra converts a PowerVSMachineProviderConfig into an IBMPowerVSMachine spec.
func (p Platform) ToInfra(value *runtime.RawExtension, path *field.Path, r *convert.Report) (convert.InfraSpec, convert.MachineValues) {
	var ps mapiv1.PowerVSMachineProviderConfig
	if !convert.DecodeProviderSpec(value, &ps, path, r) {
		return nil, convert.MachineValues{}
	}
	var mv convert.MachineValues
	convert.CheckTypeMeta(ps.APIVersion, ps.Kind, convert.SpecType{APIVersion: mapiv1.GroupVersion.String(), Kind: ProviderSpecKind}, path, r)
	if !reflect.ValueOf(ps.ObjectMeta).IsZero() {
		r.Warn(path.Child("metadata"), "ignored by the Machine API and dropped")
	}
	out := &capibmv1.IBMPowerVSMachineSpec{}

	// Where the instance runs and what it boots.
	out.ServiceInstance = p.serviceInstanceToCAPIBM(ps.ServiceInstance, path.Child("serviceInstance"), r)
	out.Image = refToCAPIBM(ps.Image, false, path.Child("image"), r)
	if n := refToCAPIBM(ps.Network, true, path.Child("network"), r); n != nil {
		out.Network = *n
	}
	if ps.KeyPairName == "" {
		r.Error(field.Required(path.Child("keyPairName"), "the Machine API requires an SSH key pair (its webhook refuses a providerSpec without one)"))
	}
	out.SSHKey = ps.KeyPairName

	// Size.
	sizeToCAPIBM(&ps, out, path, r)

	// Load balancers.
	if len(ps.LoadBalancers) > 0 {
		names := make([]string, len(ps.LoadBalancers))
		for i, lb := range ps.LoadBalancers {
			names[i] = lb.Name
		}
		r.Unsupported(path.Child("loadBalancers"), names, capibm+" (it adds control-plane Machines to the IBMPowerVSCluster's spec.loadBalancers, not to load balancers a Machine names)")
	}

	// Secrets.
	switch us := ps.UserDataSecret; {
	case us == nil || us.Name == "":
		r.Error(field.Required(path.Child("userDataSecret", "name"), "Cluster API Machines need bootstrap data (spec.bootstrap.dataSecretName)"))
	default:
		mv.DataSecretName = ptr.To(us.Name)
	}
	switch cs := ps.CredentialsSecret; {
	case cs == nil || cs.Name == "":
		r.Warn(path.Child("credentialsSecret"), "unset; CAPIBM uses its controller's credentials and converting back sets %s", p.credentialsSecret())
	case cs.Name != p.credentialsSecret():
		r.Error(field.Invalid(path.Child("credentialsSecret", "name"), cs.Name, "CAPIBM's controller uses its own IBM Cloud credentials for every cluster; this cluster's Machine API credentials secret is "+p.credentialsSecret()))
	}
	return out, mv
}

// serviceInstanceToCAPIBM converts the workspace. CAPIBM creates an instance in the workspace
// its IBMPowerVSMachine's serviceInstance.id names; without an id it ignores the Machine's
// serviceInstance and uses the IBMPowerVSCluster's, so a workspace given by name must be
// that one.
func (p Platform) serviceInstanceToCAPIBM(in mapiv1.PowerVSResource, path *field.Path, r *convert.Report) *capibmv1.IBMPowerVSResourceReference {
	out := refToCAPIBM(in, false, path, r)
	if out == nil || out.Name == nil {
		return out
	}
	p.checkWorkspaceName(*out.Name, path.Child("name"), r,
		"not checked: CAPIBM creates the instance in the IBMPowerVSCluster's workspace unless given its id, and the IBMPowerVSCluster is not known here (give it with --infrastructure)",
		"CAPIBM ignores a Machine's workspace name and creates the instance in the IBMPowerVSCluster's workspace, "+p.ServiceInstanceName+"; give this workspace by ID (type: ID) to convert")
	return out
}

// checkWorkspaceName reports a workspace given by name that CAPIBM would not use (it takes a
// Machine's own workspace only by id, else the IBMPowerVSCluster's): a warning unknown when
// that workspace is not known, the error other when the name is not it.
func (p Platform) checkWorkspaceName(name string, path *field.Path, r *convert.Report, unknown, other string) {
	switch {
	case p.ServiceInstanceName == "":
		r.Warn(path, "%s", unknown)
	case name != p.ServiceInstanceName:
		r.Error(field.Invalid(path, name, other))
	}
}
