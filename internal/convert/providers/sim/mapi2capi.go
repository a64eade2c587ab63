package sim

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	simv1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/convert"
)

// ToInfra converts a SimMachineProviderSpec into a SimMachine spec. The zone becomes the
// Machine's failure domain (SimMachine.spec.zone stays empty and follows it), the user data
// secret becomes bootstrap.dataSecretName, and the region must be the SimCluster's.
func (p Platform) ToInfra(value *runtime.RawExtension, path *field.Path, r *convert.Report) (convert.InfraSpec, convert.MachineValues) {
	var ps simv1.SimMachineProviderSpec
	if !convert.DecodeProviderSpec(value, &ps, path, r) {
		return nil, convert.MachineValues{}
	}
	checkTypeMeta(ps.APIVersion, ps.Kind, path, r)
	switch {
	case ps.Region == "":
		r.Warn(path.Child("region"), "unset; the cluster's region %q applies", p.Region)
	case ps.Region != p.Region:
		r.Error(field.Invalid(path.Child("region"), ps.Region, "the cluster's region is "+p.Region+" (SimCluster spec.region); the Cluster API keeps one region per cluster, so a Machine in another region cannot be converted"))
	}
	if ps.InstanceType == "" {
		r.Error(field.Required(path.Child("instanceType"), "SimMachines need an instance type"))
	}
	if ps.Image == "" {
		r.Error(field.Required(path.Child("image"), "SimMachines need an image"))
	}
	var mv convert.MachineValues
	mv.FailureDomain = ps.Zone
	switch {
	case ps.UserDataSecret == nil:
		r.Error(field.Required(path.Child("userDataSecret"), "Cluster API Machines need bootstrap data (spec.bootstrap.dataSecretName)"))
	case ps.UserDataSecret.Name == "":
		r.Error(field.Required(path.Child("userDataSecret", "name"), "Cluster API Machines need bootstrap data (spec.bootstrap.dataSecretName)"))
	default:
		name := ps.UserDataSecret.Name
		mv.DataSecretName = &name
	}
	spec := &simv1.SimMachineSpec{
		InstanceSpec: simv1.InstanceSpec{
			InstanceType: ps.InstanceType,
			Image:        ps.Image,
			Tags:         copyTags(ps.Tags),
		},
	}
	return spec, mv
}

func checkTypeMeta(apiVersion, kind string, path *field.Path, r *convert.Report) {
	if apiVersion == "" && kind == "" {
		r.Warn(path, "apiVersion and kind unset; read as %s/%s", simv1.GroupVersion, ProviderSpecKind)
		return
	}
	if apiVersion != simv1.GroupVersion.String() {
		r.Error(field.NotSupported(path.Child("apiVersion"), apiVersion, []string{simv1.GroupVersion.String()}))
	}
	if kind != ProviderSpecKind {
		r.Error(field.NotSupported(path.Child("kind"), kind, []string{ProviderSpecKind}))
	}
}

func copyTags(in map[string]string) map[string]string {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}
