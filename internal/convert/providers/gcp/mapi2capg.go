package gcp

import (
	"reflect"
	"strings"

	mapiv1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	capgv1 "sigs.k8s.io/cluster-api-provider-gcp/api/v1beta1"

	"github.com/machina-dev/machina/internal/convert"
)

// capg is CAPG's name in messages.
const capg = "CAPG"

// userDataKey is the instance metadata key both actuators put the bootstrap data under.
const userDataKey = "user-data"

// ToInfra converts a GCPMachineProviderSpec into a GCPMachine spec.
func (p Platform) ToInfra(value *runtime.RawExtension, path *field.Path, r *convert.Report) (convert.InfraSpec, convert.MachineValues) {
	var ps mapiv1.GCPMachineProviderSpec
	if !convert.DecodeProviderSpec(value, &ps, path, r) {
		return nil, convert.MachineValues{}
	}
	var mv convert.MachineValues
	convert.CheckTypeMeta(ps.APIVersion, ps.Kind, convert.SpecType{APIVersion: mapiv1.GroupVersion.String(), Legacy: legacyAPIVersion, Kind: ProviderSpecKind}, path, r)
	if !reflect.ValueOf(ps.ObjectMeta).IsZero() {
		r.Warn(path.Child("metadata"), "ignored by the Machine API and dropped")
	}
	out := &capgv1.GCPMachineSpec{}

	// Instance.
	if ps.MachineType == "" {
		r.Error(field.Required(path.Child("machineType"), ""))
	}
	out.InstanceType = ps.MachineType
	p.placementToCAPG(&ps, path, r)
	mv.FailureDomain = ps.Zone
	out.AdditionalLabels = labelsToCAPG(ps.Labels, path.Child("labels"), r)
	out.AdditionalNetworkTags = networkTags(ps.Tags, path.Child("tags"), r)
	out.AdditionalMetadata = metadataToCAPG(ps.Metadata, path.Child("gcpMetadata"), r)
	out.ResourceManagerTags = resourceTagsToCAPG(ps.ResourceManagerTags)
	out.ServiceAccount = serviceAccountToCAPG(ps.ServiceAccounts, path.Child("serviceAccounts"), r)
	out.IPForwarding = ptr.To(capgv1.IPForwardingDisabled)
	if ps.CanIPForward {
		out.IPForwarding = ptr.To(capgv1.IPForwardingEnabled)
	}
	if ps.DeletionProtection {
		r.Unsupported(path.Child("deletionProtection"), true, capg)
	}
	if len(ps.TargetPools) > 0 {
		r.Unsupported(path.Child("targetPools"), ps.TargetPools, capg+" (it adds instances to no target pool)")
	}

	// Scheduling and security.
	schedulingToCAPG(&ps, out, path, r)
	out.ShieldedInstanceConfig = shieldedToCAPG(ps.ShieldedInstanceConfig, path.Child("shieldedInstanceConfig"), r)
	out.ConfidentialCompute = confidentialToCAPG(ps.ConfidentialCompute, path.Child("confidentialCompute"), r)
	out.GuestAccelerators = gpusToCAPG(ps.GPUs, ps.Zone, path.Child("gpus"), r)

	// Secrets.
	switch {
	case ps.UserDataSecret == nil || ps.UserDataSecret.Name == "":
		r.Error(field.Required(path.Child("userDataSecret", "name"), "Cluster API Machines need bootstrap data (spec.bootstrap.dataSecretName)"))
	default:
		mv.DataSecretName = ptr.To(ps.UserDataSecret.Name)
	}
	switch cs := ps.CredentialsSecret; {
	case cs == nil || cs.Name == "":
		r.Warn(path.Child("credentialsSecret"), "unset; CAPG uses the GCPCluster's credentials and converting back sets %s", p.credentialsSecret())
	case cs.Name != p.credentialsSecret():
		r.Error(field.Invalid(path.Child("credentialsSecret", "name"), cs.Name, "CAPG takes credentials from the GCPCluster (spec.credentialsRef), one per cluster; this cluster's Machine API credentials secret is "+p.credentialsSecret()))
	}

	// Disks and network.
	p.disksToCAPG(&ps, out, path.Child("disks"), r)
	p.networkToCAPG(&ps, out, path.Child("networkInterfaces"), r)
	return out, mv
}

// placementToCAPG checks the region, project and zone: CAPG keeps one region and one project
// per cluster (GCPCluster spec.region and spec.project) and takes the zone from the Machine.
func (p Platform) placementToCAPG(ps *mapiv1.GCPMachineProviderSpec, path *field.Path, r *convert.Report) {
	switch {
	case ps.Region == "":
		r.Warn(path.Child("region"), "unset; the cluster's region %s applies", p.Region)
	case ps.Region != p.Region:
		r.Error(field.Invalid(path.Child("region"), ps.Region, "the cluster's region is "+p.Region+" (Infrastructure status.platformStatus.gcp.region); CAPG keeps one region per cluster (GCPCluster spec.region), so a Machine in another region cannot be converted"))
	}
	switch {
	case ps.ProjectID == "" && p.Project == "":
		r.Warn(path.Child("projectID"), "unset; the Machine API uses the credentials' project, CAPG the GCPCluster's, which is not known here")
	case ps.ProjectID == "":
		r.Warn(path.Child("projectID"), "unset; the Machine API uses the credentials' project, CAPG the GCPCluster's (%s), which converting back writes", p.Project)
	case p.Project == "":
		r.Warn(path.Child("projectID"), "not checked: the cluster's project is not known here; CAPG creates the instance in the GCPCluster's spec.project")
	case ps.ProjectID != p.Project:
		r.Error(field.Invalid(path.Child("projectID"), ps.ProjectID, "the cluster's project is "+p.Project+"; CAPG keeps one project per cluster (GCPCluster spec.project), so a Machine in another project cannot be converted"))
	}
	zp := path.Child("zone")
	switch zr := ZoneRegion(ps.Zone); {
	case ps.Zone == "":
		r.Error(field.Required(zp, "the instance's zone; it becomes the Cluster API Machine's spec.failureDomain"))
	case zr != "" && zr != p.Region:
		r.Error(field.Invalid(zp, ps.Zone, "the zone lies in "+zr+", not in the cluster's region "+p.Region))
	}
}

// vmProject is the project the Machine API creates the instance in, as far as it is known.
func (p Platform) vmProject(ps *mapiv1.GCPMachineProviderSpec) string {
	if ps.ProjectID != "" {
		return ps.ProjectID
	}
	return p.Project
}

// labelsToCAPG copies the instance labels. CAPG lower-cases them; GCP takes no others.
func labelsToCAPG(in map[string]string, path *field.Path, r *convert.Report) capgv1.Labels {
	if len(in) == 0 {
		return nil
	}
	out := make(capgv1.Labels, len(in))
	for k, v := range in {
		if k != strings.ToLower(k) || v != strings.ToLower(v) {
			r.Error(field.Invalid(path.Key(k), v, "GCP labels are lower-case, and CAPG lower-cases what it is given"))
		}
		out[k] = v
	}
	return out
}

// networkTags copies the network tags, which both APIs give the instance in order.
func networkTags(in []string, path *field.Path, r *convert.Report) []string {
	if len(in) == 0 {
		return nil
	}
	for i, t := range in {
		if t == "" {
			r.Error(field.Required(path.Index(i), "network tags cannot be empty"))
		}
	}
	return append([]string(nil), in...)
}

// metadataToCAPG copies the instance metadata. The bootstrap data's key is the converter's:
// the Machine API lets the providerSpec override the user data with it, CAPG would send it twice.
func metadataToCAPG(in []*mapiv1.GCPMetadata, path *field.Path, r *convert.Report) []capgv1.MetadataItem {
	var out []capgv1.MetadataItem
	seen := map[string]bool{}
	for i, m := range in {
		mp := path.Index(i)
		switch {
		case m == nil:
			r.Error(field.Required(mp, ""))
			continue
		case m.Key == "":
			r.Error(field.Required(mp.Child("key"), ""))
		case m.Key == userDataKey:
			r.Error(field.Invalid(mp.Child("key"), m.Key, "overrides the bootstrap data in the Machine API; CAPG always sends the bootstrap data secret's under this key"))
		case seen[m.Key]:
			r.Error(field.Duplicate(mp.Child("key"), m.Key))
		}
		seen[m.Key] = true
		out = append(out, capgv1.MetadataItem{Key: m.Key, Value: copyString(m.Value)})
	}
	return out
}

func resourceTagsToCAPG(in []mapiv1.ResourceManagerTag) capgv1.ResourceManagerTags {
	var out capgv1.ResourceManagerTags
	for _, t := range in {
		out = append(out, capgv1.ResourceManagerTag{ParentID: t.ParentID, Key: t.Key, Value: t.Value})
	}
	return out
}

// serviceAccountToCAPG takes the one service account GCP allows. CAPG cannot leave an
// instance without one: unset, it gives the project's default compute service account.
func serviceAccountToCAPG(in []mapiv1.GCPServiceAccount, path *field.Path, r *convert.Report) *capgv1.ServiceAccount {
	switch {
	case len(in) == 0:
		r.Error(field.Required(path, "CAPG gives every instance a service account (the project's default one when unset); the Machine API gives this one none"))
		return nil
	case len(in) > 1:
		r.Error(field.TooMany(path, len(in), 1))
		return nil
	case in[0].Email == "":
		r.Error(field.Required(path.Index(0).Child("email"), ""))
		return nil
	}
	return &capgv1.ServiceAccount{Email: in[0].Email, Scopes: append([]string(nil), in[0].Scopes...)}
}

// schedulingToCAPG converts how the instance is bought and what happens on maintenance.
func schedulingToCAPG(ps *mapiv1.GCPMachineProviderSpec, out *capgv1.GCPMachineSpec, path *field.Path, r *convert.Report) {
	out.Preemptible = ps.Preemptible
	spot := false
	if m := ps.ProvisioningModel; m != nil {
		switch *m {
		case mapiv1.GCPSpotInstance:
			spot = true
			out.ProvisioningModel = ptr.To(capgv1.ProvisioningModelSpot)
			if ps.Preemptible {
				r.Error(field.Forbidden(path.Child("provisioningModel"), "Spot cannot be combined with preemptible"))
			}
		default:
			r.Error(field.NotSupported(path.Child("provisioningModel"), *m, []string{string(mapiv1.GCPSpotInstance)}))
		}
	}
	switch h := ps.OnHostMaintenance; h {
	case "":
	case mapiv1.MigrateHostMaintenanceType, mapiv1.TerminateHostMaintenanceType:
		out.OnHostMaintenance = ptr.To(capgv1.HostMaintenancePolicy(h))
	default:
		r.Error(field.NotSupported(path.Child("onHostMaintenance"), h, []string{"Migrate", "Terminate"}))
	}
	rp := path.Child("restartPolicy")
	switch ps.RestartPolicy {
	case "":
	case mapiv1.RestartPolicyAlways:
		if ps.Preemptible || spot {
			r.Error(field.Forbidden(rp, "preemptible and Spot instances cannot be restarted automatically"))
		} else {
			r.Warn(rp, "dropped: CAPG leaves automatic restart to GCP, whose default for standard instances is Always")
		}
	case mapiv1.RestartPolicyNever:
		r.Unsupported(rp, ps.RestartPolicy, capg+" (it leaves automatic restart to GCP)")
	default:
		r.Error(field.NotSupported(rp, ps.RestartPolicy, []string{"Always", "Never"}))
	}
}

// shieldedToCAPG copies the Shielded VM settings. Unset, both actuators leave them to GCP
// (the Machine API turns them all off for images that cannot boot with them).
func shieldedToCAPG(in mapiv1.GCPShieldedInstanceConfig, path *field.Path, r *convert.Report) *capgv1.GCPShieldedInstanceConfig {
	if in == (mapiv1.GCPShieldedInstanceConfig{}) {
		return nil
	}
	for _, f := range []struct {
		name string
		v    string
	}{{"secureBoot", string(in.SecureBoot)}, {"virtualizedTrustedPlatformModule", string(in.VirtualizedTrustedPlatformModule)}, {"integrityMonitoring", string(in.IntegrityMonitoring)}} {
		if f.v != "" && f.v != "Enabled" && f.v != "Disabled" {
			r.Error(field.NotSupported(path.Child(f.name), f.v, []string{"Enabled", "Disabled"}))
		}
	}
	return &capgv1.GCPShieldedInstanceConfig{
		SecureBoot:                       capgv1.SecureBootPolicy(in.SecureBoot),
		VirtualizedTrustedPlatformModule: capgv1.VirtualizedTrustedPlatformModulePolicy(in.VirtualizedTrustedPlatformModule),
		IntegrityMonitoring:              capgv1.IntegrityMonitoringPolicy(in.IntegrityMonitoring),
	}
}

var confidentialPolicies = []string{"Enabled", "Disabled", "AMDEncryptedVirtualization", "AMDEncryptedVirtualizationNestedPaging", "IntelTrustedDomainExtensions"}

func confidentialToCAPG(in mapiv1.ConfidentialComputePolicy, path *field.Path, r *convert.Report) *capgv1.ConfidentialComputePolicy {
	if in == "" {
		return nil
	}
	if !contains(confidentialPolicies, string(in)) {
		r.Error(field.NotSupported(path, in, confidentialPolicies))
	}
	return ptr.To(capgv1.ConfidentialComputePolicy(in))
}

// acceleratorType is the partial URL of an accelerator type in a zone; CAPG hands the type
// to GCP as it is, the Machine API builds this URL from the type's name.
func acceleratorType(zone, name string) string { return "zones/" + zone + "/acceleratorTypes/" + name }

// gpusToCAPG converts the one GPU type an instance may have.
func gpusToCAPG(in []mapiv1.GCPGPUConfig, zone string, path *field.Path, r *convert.Report) []capgv1.Accelerator {
	switch {
	case len(in) == 0:
		return nil
	case len(in) > 1:
		r.Error(field.TooMany(path, len(in), 1))
		return nil
	}
	g := in[0]
	ok := true
	if g.Type == "" || strings.Contains(g.Type, "/") {
		r.Error(field.Invalid(path.Index(0).Child("type"), g.Type, "an accelerator type name, e.g. nvidia-tesla-t4"))
		ok = false
	}
	if g.Count < 1 {
		r.Error(field.Invalid(path.Index(0).Child("count"), g.Count, "must be at least 1"))
		ok = false
	}
	if !ok || zone == "" {
		return nil
	}
	return []capgv1.Accelerator{{Type: acceleratorType(zone, g.Type), Count: int64(g.Count)}}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func copyString(p *string) *string {
	if p == nil {
		return nil
	}
	return ptr.To(*p)
}
