package sim

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	simv1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/convert"
)

// FromInfra converts a SimMachine spec and the Machine's values back into a
// SimMachineProviderSpec. The region comes from the cluster.
func (p Platform) FromInfra(spec convert.InfraSpec, mv convert.MachineValues, paths convert.InfraPaths, r *convert.Report) *runtime.RawExtension {
	s, ok := convert.InfraSpecAs[simv1.SimMachineSpec](spec, paths.Infra, r)
	if !ok {
		return nil
	}
	ps := simv1.SimMachineProviderSpec{
		Region:       p.Region,
		Zone:         mv.FailureDomain,
		InstanceType: s.InstanceType,
		Image:        s.Image,
		Tags:         copyTags(s.Tags),
	}
	ps.APIVersion = simv1.GroupVersion.String()
	ps.Kind = ProviderSpecKind
	switch {
	case s.Zone == "":
	case mv.FailureDomain == "":
		ps.Zone = s.Zone
		r.Warn(paths.Infra.Child("zone"), "carried as the providerSpec zone; converting back sets the Machine's failureDomain instead")
	case s.Zone != mv.FailureDomain:
		r.Error(field.Invalid(paths.Infra.Child("zone"), s.Zone, "differs from the Machine's failureDomain "+quote(mv.FailureDomain)+"; the Machine API has one zone per Machine"))
	default:
		r.Warn(paths.Infra.Child("zone"), "same as the Machine's failureDomain; converting back leaves it empty")
	}
	if s.InstanceType == "" {
		r.Error(field.Required(paths.Infra.Child("instanceType"), ""))
	}
	if s.Image == "" {
		r.Error(field.Required(paths.Infra.Child("image"), ""))
	}
	if mv.DataSecretName != nil && *mv.DataSecretName != "" {
		ps.UserDataSecret = &corev1.LocalObjectReference{Name: *mv.DataSecretName}
	}
	return convert.Encode(&ps, paths.Infra, r)
}

func quote(s string) string { return "\"" + s + "\"" }
