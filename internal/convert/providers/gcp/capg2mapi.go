package gcp

import (
	"strings"

	mapiv1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	capgv1 "sigs.k8s.io/cluster-api-provider-gcp/api/v1beta1"

	"github.com/machina-dev/machina/internal/convert"
)

// CAPG's service account when the GCPMachine names none.
const (
	defaultServiceAccount = "default"
	cloudPlatformScope    = "https://www.googleapis.com/auth/cloud-platform"
)

// FromInfra converts a GCPMachine spec and the Machine's values back into a
// GCPMachineProviderSpec. The project, region, network and credentials secret come from the
// cluster.
func (p Platform) FromInfra(spec convert.InfraSpec, mv convert.MachineValues, paths convert.InfraPaths, r *convert.Report) *runtime.RawExtension {
	s, ok := convert.InfraSpecAs[capgv1.GCPMachineSpec](spec, paths.Infra, r)
	if !ok {
		return nil
	}
	path := paths.Infra
	ps := &mapiv1.GCPMachineProviderSpec{}
	ps.APIVersion = mapiv1.GroupVersion.String()
	ps.Kind = ProviderSpecKind

	// Instance and placement.
	ps.MachineType = s.InstanceType
	if s.InstanceType == "" {
		r.Error(field.Required(path.Child("instanceType"), ""))
	}
	ps.Region = p.Region
	ps.ProjectID = p.Project
	if p.Project == "" {
		r.Error(field.Invalid(path, "", "the Machine API names the instance's project, which is the GCPCluster's spec.project; the cluster's project is not known here: give the Infrastructure or the GCPCluster (--infrastructure)"))
	}
	ps.Zone = mv.FailureDomain
	if ps.Zone == "" {
		r.Error(field.Required(paths.Machine.Child("failureDomain"), "the Machine API needs the instance's zone"))
	}
	ps.Labels = labelsToMAPI(s.AdditionalLabels, path.Child("additionalLabels"), r)
	ps.Tags = networkTags(s.AdditionalNetworkTags, path.Child("additionalNetworkTags"), r)
	ps.Metadata = metadataToMAPI(s.AdditionalMetadata, path.Child("additionalMetadata"), r)
	for _, t := range s.ResourceManagerTags {
		ps.ResourceManagerTags = append(ps.ResourceManagerTags, mapiv1.ResourceManagerTag{ParentID: t.ParentID, Key: t.Key, Value: t.Value})
	}
	ps.ServiceAccounts = serviceAccountToMAPI(s.ServiceAccount, path.Child("serviceAccounts"), r)
	switch f := s.IPForwarding; {
	case f == nil:
		ps.CanIPForward = true
		r.Warn(path.Child("ipForwarding"), "unset; CAPG's default Enabled, which converting back writes")
	case *f == capgv1.IPForwardingEnabled:
		ps.CanIPForward = true
	case *f != capgv1.IPForwardingDisabled:
		r.Error(field.NotSupported(path.Child("ipForwarding"), *f, []string{"Enabled", "Disabled"}))
	}

	// Scheduling and security.
	schedulingToMAPI(s, ps, path, r)
	ps.ShieldedInstanceConfig = shieldedToMAPI(s.ShieldedInstanceConfig, path.Child("shieldedInstanceConfig"), r)
	if c := s.ConfidentialCompute; c != nil {
		if !contains(confidentialPolicies, string(*c)) {
			r.Error(field.NotSupported(path.Child("confidentialCompute"), *c, confidentialPolicies))
		}
		ps.ConfidentialCompute = mapiv1.ConfidentialComputePolicy(*c)
	}
	ps.GPUs = gpusToMAPI(s.GuestAccelerators, mv.FailureDomain, path.Child("guestAccelerators"), r)

	// Secrets.
	if mv.DataSecretName != nil && *mv.DataSecretName != "" {
		ps.UserDataSecret = &corev1.LocalObjectReference{Name: *mv.DataSecretName}
	}
	ps.CredentialsSecret = &corev1.LocalObjectReference{Name: p.credentialsSecret()}

	// Disks and network.
	ps.Disks = disksToMAPI(s, path, r)
	ps.NetworkInterfaces = p.networkToMAPI(s, paths, r)
	return convert.Encode(ps, path, r)
}

func labelsToMAPI(in capgv1.Labels, path *field.Path, r *convert.Report) map[string]string {
	for k, v := range in {
		if k != strings.ToLower(k) || v != strings.ToLower(v) {
			r.Error(field.Invalid(path.Key(k), v, "CAPG lower-cases labels; write them in lower case"))
		}
	}
	return copyLabels(in)
}

func metadataToMAPI(in []capgv1.MetadataItem, path *field.Path, r *convert.Report) []*mapiv1.GCPMetadata {
	var out []*mapiv1.GCPMetadata
	seen := map[string]bool{}
	for i, m := range in {
		kp := path.Index(i).Child("key")
		switch {
		case m.Key == "":
			r.Error(field.Required(kp, ""))
		case m.Key == userDataKey:
			r.Error(field.Invalid(kp, m.Key, "CAPG sends the bootstrap data under this key too; the Machine API would replace the bootstrap data with this value"))
		case seen[m.Key]:
			r.Error(field.Duplicate(kp, m.Key))
		}
		seen[m.Key] = true
		out = append(out, &mapiv1.GCPMetadata{Key: m.Key, Value: copyString(m.Value)})
	}
	return out
}

func serviceAccountToMAPI(sa *capgv1.ServiceAccount, path *field.Path, r *convert.Report) []mapiv1.GCPServiceAccount {
	if sa == nil {
		r.Warn(path, "unset; CAPG gives the project's default service account with the cloud-platform scope, which converting back writes")
		return []mapiv1.GCPServiceAccount{{Email: defaultServiceAccount, Scopes: []string{cloudPlatformScope}}}
	}
	if sa.Email == "" {
		r.Error(field.Required(path.Child("email"), "the Machine API needs the service account's e-mail"))
	}
	return []mapiv1.GCPServiceAccount{{Email: sa.Email, Scopes: append([]string(nil), sa.Scopes...)}}
}

func schedulingToMAPI(s *capgv1.GCPMachineSpec, ps *mapiv1.GCPMachineProviderSpec, path *field.Path, r *convert.Report) {
	ps.Preemptible = s.Preemptible
	if m := s.ProvisioningModel; m != nil {
		mp := path.Child("provisioningModel")
		switch *m {
		case capgv1.ProvisioningModelSpot:
			ps.ProvisioningModel = ptr.To(mapiv1.GCPSpotInstance)
			if s.Preemptible {
				r.Error(field.Forbidden(mp, "the Machine API cannot combine Spot with preemptible"))
			}
		case capgv1.ProvisioningModelStandard:
			r.Warn(mp, "dropped: Standard is the default")
		default:
			r.Error(field.NotSupported(mp, *m, []string{string(capgv1.ProvisioningModelStandard), string(capgv1.ProvisioningModelSpot)}))
		}
	}
	if h := s.OnHostMaintenance; h != nil {
		switch *h {
		case capgv1.HostMaintenancePolicyMigrate, capgv1.HostMaintenancePolicyTerminate:
			ps.OnHostMaintenance = mapiv1.GCPHostMaintenanceType(*h)
		default:
			r.Error(field.NotSupported(path.Child("onHostMaintenance"), *h, []string{"Migrate", "Terminate"}))
		}
	}
}

// shieldedToMAPI copies the Shielded VM settings. An empty CAPG setting sends GCP's defaults
// where the Machine API, given none, first checks that the image can boot with them.
func shieldedToMAPI(in *capgv1.GCPShieldedInstanceConfig, path *field.Path, r *convert.Report) mapiv1.GCPShieldedInstanceConfig {
	if in == nil {
		return mapiv1.GCPShieldedInstanceConfig{}
	}
	if *in == (capgv1.GCPShieldedInstanceConfig{}) {
		r.Warn(path, "empty: CAPG asks for vTPM and integrity monitoring, which the Machine API does too unless the image cannot boot with them; converting back leaves it unset")
	}
	for _, f := range []struct{ name, v string }{{"secureBoot", string(in.SecureBoot)}, {"virtualizedTrustedPlatformModule", string(in.VirtualizedTrustedPlatformModule)}, {"integrityMonitoring", string(in.IntegrityMonitoring)}} {
		if f.v != "" && f.v != "Enabled" && f.v != "Disabled" {
			r.Error(field.NotSupported(path.Child(f.name), f.v, []string{"Enabled", "Disabled"}))
		}
	}
	return mapiv1.GCPShieldedInstanceConfig{
		SecureBoot:                       mapiv1.SecureBootPolicy(in.SecureBoot),
		VirtualizedTrustedPlatformModule: mapiv1.VirtualizedTrustedPlatformModulePolicy(in.VirtualizedTrustedPlatformModule),
		IntegrityMonitoring:              mapiv1.IntegrityMonitoringPolicy(in.IntegrityMonitoring),
	}
}

// gpusToMAPI takes the accelerator type's name from its URL in the Machine's zone, which is
// where the Machine API looks it up.
func gpusToMAPI(in []capgv1.Accelerator, zone string, path *field.Path, r *convert.Report) []mapiv1.GCPGPUConfig {
	switch {
	case len(in) == 0:
		return nil
	case len(in) > 1:
		r.Error(field.TooMany(path, len(in), 1))
		return nil
	}
	a := in[0]
	name, ok := strings.CutPrefix(a.Type, acceleratorType(zone, ""))
	if !ok || zone == "" || name == "" || strings.Contains(name, "/") {
		r.Error(field.Invalid(path.Index(0).Child("type"), a.Type, "the Machine API takes accelerator types of the Machine's zone, "+acceleratorType(zone, "<type>")))
		return nil
	}
	if a.Count < 1 || a.Count > 1<<31-1 {
		r.Error(field.Invalid(path.Index(0).Child("count"), a.Count, "must be at least 1"))
		return nil
	}
	return []mapiv1.GCPGPUConfig{{Type: name, Count: int32(a.Count)}}
}
