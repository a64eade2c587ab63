package powervs

import (
	mapiv1 "github.com/openshift/api/machine/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	capibmv1 "sigs.k8s.io/cluster-api-provider-ibmcloud/api/powervs/v1beta3"

	"github.com/machina-dev/machina/internal/convert"
)

// FromInfra converts an IBMPowerVSMachine spec and the Machine's values back into a
// PowerVSMachineProviderConfig. The credentials secret, and the workspace of a spec that
// names none, come from the cluster.
func (p Platform) FromInfra(spec convert.InfraSpec, mv convert.MachineValues, paths convert.InfraPaths, r *convert.Report) *runtime.RawExtension {
	s, ok := convert.InfraSpecAs[capibmv1.IBMPowerVSMachineSpec](spec, paths.Infra, r)
	if !ok {
		return nil
	}
	path := paths.Infra
	ps := &mapiv1.PowerVSMachineProviderConfig{}
	ps.APIVersion = mapiv1.GroupVersion.String()
	ps.Kind = ProviderSpecKind

	// Where the instance runs and what it boots.
	if mv.FailureDomain != "" {
		r.Error(field.Invalid(paths.Machine.Child("failureDomain"), mv.FailureDomain, "the Machine API has no failure domain on PowerVS (the workspace decides the zone), and CAPIBM reports none"))
	}
	ps.ServiceInstance = p.serviceInstanceToMAPI(s.ServiceInstance, path.Child("serviceInstance"), r)
	ps.Image = imageToMAPI(s, path, r)
	ps.Network, _ = refToMAPI(s.Network, true, "the Machine API needs the instance's network (CAPIBM would take the IBMPowerVSCluster's status.network)", path.Child("network"), r)
	ps.KeyPairName = s.SSHKey
	if s.SSHKey == "" {
		r.Error(field.Required(path.Child("sshKey"), "the Machine API requires an SSH key pair (keyPairName)"))
	}

	// Size.
	sizeToMAPI(s, ps, path, r)

	// Secrets.
	if mv.DataSecretName != nil && *mv.DataSecretName != "" {
		ps.UserDataSecret = &mapiv1.PowerVSSecretReference{Name: *mv.DataSecretName}
	}
	ps.CredentialsSecret = &mapiv1.PowerVSSecretReference{Name: p.credentialsSecret()}
	return convert.Encode(ps, path, r)
}

// serviceInstanceToMAPI converts the workspace: without one, or with one named (which CAPIBM
// ignores), the instance goes to the IBMPowerVSCluster's workspace, which the Machine API
// must then name.
func (p Platform) serviceInstanceToMAPI(in *capibmv1.IBMPowerVSResourceReference, path *field.Path, r *convert.Report) mapiv1.PowerVSResource {
	if in == nil || (in.ID == nil && in.Name == nil && in.RegEx == nil) {
		if p.ServiceInstanceName == "" {
			r.Error(field.Required(path, "CAPIBM creates the instance in the IBMPowerVSCluster's workspace, which is not known here: give the IBMPowerVSCluster (--infrastructure), or serviceInstance.id"))
			return mapiv1.PowerVSResource{}
		}
		r.Warn(path, "unset; CAPIBM uses the IBMPowerVSCluster's workspace, %s, which is written by name (converting back names it too)", p.ServiceInstanceName)
		return mapiv1.PowerVSResource{Type: mapiv1.PowerVSResourceTypeName, Name: ptr.To(p.ServiceInstanceName)}
	}
	out, ok := refToMAPI(*in, false, "", path, r)
	if !ok || out.Name == nil {
		return out
	}
	p.checkWorkspaceName(*out.Name, path.Child("name"), r,
		"not checked: CAPIBM ignores a Machine's workspace name and uses the IBMPowerVSCluster's, which is not known here (give it with --infrastructure)",
		"CAPIBM ignores it and creates the instance in the IBMPowerVSCluster's workspace, "+p.ServiceInstanceName+", where the Machine API would use this one")
	return out
}

// imageToMAPI converts the image. imageRef names an IBMPowerVSImage, an image CAPIBM imports
// from a Cloud Object Storage bucket; the Machine API boots only images already in the
// workspace.
func imageToMAPI(s *capibmv1.IBMPowerVSMachineSpec, path *field.Path, r *convert.Report) mapiv1.PowerVSResource {
	if s.ImageRef.Name != "" {
		r.Error(field.Invalid(path.Child("imageRef", "name"), s.ImageRef.Name, "an IBMPowerVSImage CAPIBM imports from Cloud Object Storage has no Machine API equivalent: give image.id or image.name of an image in the workspace"))
		return mapiv1.PowerVSResource{}
	}
	if s.Image == nil {
		r.Error(field.Required(path.Child("image"), "the Machine API needs the image to boot"))
		return mapiv1.PowerVSResource{}
	}
	out, _ := refToMAPI(*s.Image, false, "the Machine API needs the image to boot", path.Child("image"), r)
	return out
}
