package azure

import (
	"sort"
	"strings"

	mapiv1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	capzv1 "sigs.k8s.io/cluster-api-provider-azure/api/v1beta1"

	"github.com/machina-dev/machina/internal/convert"
)

// FromInfra converts an AzureMachine spec and the Machine's values back into an
// AzureMachineProviderSpec. The location, resource groups, virtual network, load balancer
// and credentials secret come from the cluster.
func (p Platform) FromInfra(spec convert.InfraSpec, mv convert.MachineValues, paths convert.InfraPaths, r *convert.Report) *runtime.RawExtension {
	s, ok := convert.InfraSpecAs[capzv1.AzureMachineSpec](spec, paths.Infra, r)
	if !ok {
		return nil
	}
	path := paths.Infra
	ps := &mapiv1.AzureMachineProviderSpec{}
	ps.APIVersion = mapiv1.GroupVersion.String()
	ps.Kind = ProviderSpecKind

	// Virtual machine.
	if s.VMSize == "" {
		r.Error(field.Required(path.Child("vmSize"), ""))
	}
	ps.VMSize = s.VMSize
	ps.Image = p.imageToMAPI(s.Image, path.Child("image"), r)
	ps.SSHPublicKey = s.SSHPublicKey
	ps.Tags = tagsToMAPI(s.AdditionalTags)
	ps.SpotVMOptions = spotToMAPI(s.SpotVMOptions, path.Child("spotVMOptions"), r)
	ps.Diagnostics = diagnosticsToMAPI(s.Diagnostics, path.Child("diagnostics"), r)
	ps.CapacityReservationGroupID = ptr.Deref(s.CapacityReservationGroupID, "")
	ps.Zone = mv.FailureDomain
	if fd := ptr.Deref(s.FailureDomain, ""); fd != "" {
		if fd != mv.FailureDomain {
			r.Error(field.Invalid(path.Child("failureDomain"), fd, "deprecated, and differs from the Machine's failureDomain "+orNone(mv.FailureDomain)))
		} else {
			r.Warn(path.Child("failureDomain"), "dropped: deprecated, and it repeats the Machine's failureDomain")
		}
	}

	// Storage and security.
	ps.OSDisk = osDiskToMAPI(s.OSDisk, path.Child("osDisk"), r)
	ps.DataDisks = dataDisksToMAPI(s.DataDisks, path.Child("dataDisks"), r)
	if c := s.AdditionalCapabilities; c != nil && c.UltraSSDEnabled != nil {
		ps.UltraSSDCapability = mapiv1.AzureUltraSSDCapabilityDisabled
		if *c.UltraSSDEnabled {
			ps.UltraSSDCapability = mapiv1.AzureUltraSSDCapabilityEnabled
		}
	}
	ps.SecurityProfile = securityToMAPI(s.SecurityProfile, ps.OSDisk, path.Child("securityProfile"), r)

	// Secrets and cluster-wide values.
	if mv.DataSecretName != nil && *mv.DataSecretName != "" {
		ps.UserDataSecret = &corev1.SecretReference{Name: *mv.DataSecretName}
	}
	ps.CredentialsSecret = &corev1.SecretReference{Name: p.credentialsSecret(), Namespace: p.secretNamespace()}
	p.clusterValuesToMAPI(ps, paths, r)

	// Network and identity.
	nicToMAPI(s, ps, path, r)
	p.dualStackToMAPI(ps, paths, r)
	ps.PublicIP = s.AllocatePublicIP
	ps.ManagedIdentity = p.identityToMAPI(s, ps.ResourceGroup, path, r)
	unsupportedToMAPI(s, path, r)
	return convert.Encode(ps, path, r)
}

// clusterValuesToMAPI writes the values CAPZ keeps on the AzureCluster.
func (p Platform) clusterValuesToMAPI(ps *mapiv1.AzureMachineProviderSpec, paths convert.InfraPaths, r *convert.Report) {
	ps.Location = p.Location
	ps.ResourceGroup = p.ResourceGroup
	ps.NetworkResourceGroup = p.networkResourceGroup()
	ps.Vnet = p.Vnet
	if p.Vnet == "" {
		r.Error(field.Invalid(paths.Infra, "", "the Machine API names the virtual network on every Machine, and the AzureCluster's (spec.networkSpec.vnet.name) is not known here: give the AzureCluster"))
	}
	if p.controlPlane {
		p.controlPlaneLBsToMAPI(ps, paths, r)
		return
	}
	if p.OutboundLoadBalancer == nil {
		r.Error(field.Invalid(paths.Infra, "", "the Machine API names the node outbound load balancer on every Machine, and the AzureCluster's (spec.networkSpec.nodeOutboundLB) is not known here: give the AzureCluster"))
	} else {
		ps.PublicLoadBalancer = *p.OutboundLoadBalancer
	}
}

// unsupportedToMAPI reports the CAPZ fields the Machine API has no word for.
func unsupportedToMAPI(s *capzv1.AzureMachineSpec, path *field.Path, r *convert.Report) {
	u := func(name string, v any) { r.Unsupported(path.Child(name), v, convert.MachineAPI) }
	if len(s.DNSServers) > 0 {
		u("dnsServers", s.DNSServers)
	}
	if s.EnableIPForwarding {
		u("enableIPForwarding", true)
	}
	if ptr.Deref(s.DisableExtensionOperations, false) {
		u("disableExtensionOperations", true)
	}
	if v := s.DisableVMBootstrapExtension; v != nil && !*v {
		u("disableVMBootstrapExtension", false)
	}
	if len(s.VMExtensions) > 0 {
		u("vmExtensions", len(s.VMExtensions))
	}
	if s.SystemAssignedIdentityRole != nil {
		u("systemAssignedIdentityRole", "<set>")
	}
	if s.RoleAssignmentName != "" { //nolint:staticcheck // read only to report a deprecated field
		u("roleAssignmentName", s.RoleAssignmentName) //nolint:staticcheck // read only to report a deprecated field
	}
}

// imageToMAPI converts an image ID in the cluster's subscription or a marketplace image.
func (p Platform) imageToMAPI(img *capzv1.Image, path *field.Path, r *convert.Report) mapiv1.Image {
	switch {
	case img == nil:
		r.Error(field.Required(path, "the Machine API needs an explicit image"))
	case img.SharedGallery != nil: //nolint:staticcheck // read only to report a deprecated field
		r.Unsupported(path.Child("sharedGallery"), img.SharedGallery.Name, convert.MachineAPI+" (give the image by id)") //nolint:staticcheck // read only to report a deprecated field
	case img.ComputeGallery != nil:
		r.Unsupported(path.Child("computeGallery"), img.ComputeGallery.Name, convert.MachineAPI+" (give the image by id)")
	case img.ID != nil:
		return p.imageIDToMAPI(*img.ID, path.Child("id"), r)
	case img.Marketplace != nil:
		m := img.Marketplace
		out := mapiv1.Image{Publisher: m.Publisher, Offer: m.Offer, SKU: m.SKU, Version: m.Version, Type: mapiv1.AzureImageTypeMarketplaceNoPlan}
		if m.ThirdPartyImage {
			out.Type = mapiv1.AzureImageTypeMarketplaceWithPlan
		}
		if m.Publisher == "" || m.Offer == "" || m.SKU == "" || m.Version == "" {
			r.Error(field.Required(path.Child("marketplace"), "a publisher, offer, sku and version"))
		}
		return out
	default:
		r.Error(field.Required(path, "an id or a marketplace image"))
	}
	return mapiv1.Image{}
}

func (p Platform) imageIDToMAPI(id string, path *field.Path, r *convert.Report) mapiv1.Image {
	prefix := "/subscriptions/" + p.SubscriptionID + "/"
	switch {
	case p.SubscriptionID == "":
		r.Error(field.Invalid(path, id, "the Machine API names images within the cluster's subscription, which is not known here: give the AzureCluster"))
	case len(id) <= len(prefix) || !strings.EqualFold(id[:len(prefix)], prefix):
		r.Error(field.Invalid(path, id, "the Machine API names images within the cluster's subscription "+p.SubscriptionID))
	default:
		return mapiv1.Image{ResourceID: id[len(prefix)-1:]}
	}
	return mapiv1.Image{}
}

func tagsToMAPI(tags capzv1.Tags) map[string]string {
	if len(tags) == 0 {
		return nil
	}
	out := make(map[string]string, len(tags))
	for k, v := range tags {
		out[k] = v
	}
	return out
}

func spotToMAPI(s *capzv1.SpotVMOptions, path *field.Path, r *convert.Report) *mapiv1.SpotVMOptions {
	if s == nil {
		return nil
	}
	switch e := s.EvictionPolicy; {
	case e == nil:
		r.Warn(path.Child("evictionPolicy"), "unset; CAPZ deallocates evicted VMs, as the Machine API does; converting back states Deallocate")
	case *e != capzv1.SpotEvictionPolicyDeallocate:
		r.Unsupported(path.Child("evictionPolicy"), *e, convert.MachineAPI+" (it always deallocates)")
	}
	out := &mapiv1.SpotVMOptions{}
	if s.MaxPrice != nil {
		out.MaxPrice = ptr.To(s.MaxPrice.DeepCopy())
	}
	return out
}

func diagnosticsToMAPI(d *capzv1.Diagnostics, path *field.Path, r *convert.Report) mapiv1.AzureDiagnostics {
	if d == nil || d.Boot == nil {
		r.Warn(path, "unset; CAPZ turns on managed boot diagnostics, which converting back states (AzureManaged)")
		return mapiv1.AzureDiagnostics{Boot: &mapiv1.AzureBootDiagnostics{StorageAccountType: mapiv1.AzureManagedAzureDiagnosticsStorage}}
	}
	bp := path.Child("boot")
	switch t := d.Boot.StorageAccountType; t {
	case capzv1.DisabledDiagnosticsStorage:
		return mapiv1.AzureDiagnostics{}
	case capzv1.ManagedDiagnosticsStorage:
		return mapiv1.AzureDiagnostics{Boot: &mapiv1.AzureBootDiagnostics{StorageAccountType: mapiv1.AzureManagedAzureDiagnosticsStorage}}
	case capzv1.UserManagedDiagnosticsStorage:
		if d.Boot.UserManaged == nil || d.Boot.UserManaged.StorageAccountURI == "" {
			r.Error(field.Required(bp.Child("userManaged", "storageAccountURI"), ""))
			return mapiv1.AzureDiagnostics{}
		}
		return mapiv1.AzureDiagnostics{Boot: &mapiv1.AzureBootDiagnostics{StorageAccountType: mapiv1.CustomerManagedAzureDiagnosticsStorage,
			CustomerManaged: &mapiv1.AzureCustomerManagedBootDiagnostics{StorageAccountURI: d.Boot.UserManaged.StorageAccountURI}}}
	default:
		r.Error(field.NotSupported(bp.Child("storageAccountType"), t, []string{string(capzv1.DisabledDiagnosticsStorage), string(capzv1.ManagedDiagnosticsStorage), string(capzv1.UserManagedDiagnosticsStorage)}))
		return mapiv1.AzureDiagnostics{}
	}
}

// nicToMAPI converts the one network interface the Machine API makes.
func nicToMAPI(s *capzv1.AzureMachineSpec, ps *mapiv1.AzureMachineProviderSpec, path *field.Path, r *convert.Report) {
	if s.SubnetName != "" { //nolint:staticcheck // read only to report a deprecated field
		r.Unsupported(path.Child("subnetName"), s.SubnetName, "this conversion (deprecated; use networkInterfaces)") //nolint:staticcheck // read only to report a deprecated field
	}
	if s.AcceleratedNetworking != nil { //nolint:staticcheck // read only to report a deprecated field
		r.Unsupported(path.Child("acceleratedNetworking"), *s.AcceleratedNetworking, "this conversion (deprecated; use networkInterfaces)") //nolint:staticcheck // read only to report a deprecated field
	}
	np := path.Child("networkInterfaces")
	switch len(s.NetworkInterfaces) {
	case 0:
		r.Error(field.Required(np, "the Machine API makes one interface in a named subnet"))
		return
	case 1:
	default:
		r.Unsupported(np.Index(1), s.NetworkInterfaces[1].SubnetName, convert.MachineAPI+" (it makes one interface)")
	}
	n, p0 := s.NetworkInterfaces[0], np.Index(0)
	if n.SubnetName == "" {
		r.Error(field.Required(p0.Child("subnetName"), "the Machine API needs the subnet"))
	}
	ps.Subnet = n.SubnetName
	switch n.PrivateIPConfigs {
	case 1:
	case 0:
		r.Warn(p0.Child("privateIPConfigs"), "unset; CAPZ makes one, as the Machine API does; converting back states 1")
	default:
		r.Unsupported(p0.Child("privateIPConfigs"), n.PrivateIPConfigs, convert.MachineAPI+" (it makes one IP configuration)")
	}
	if n.AcceleratedNetworking == nil {
		r.Error(field.Required(p0.Child("acceleratedNetworking"), "CAPZ decides by the VM size when unset; the Machine API needs true or false"))
	}
	ps.AcceleratedNetworking = ptr.Deref(n.AcceleratedNetworking, false)
}

// identityToMAPI returns the name of the one user-assigned identity in the Machine's resource
// group and the cluster's subscription, which is what the Machine API can name.
func (p Platform) identityToMAPI(s *capzv1.AzureMachineSpec, rg string, path *field.Path, r *convert.Report) string {
	ip := path.Child("identity")
	switch s.Identity {
	case "", capzv1.VMIdentityNone:
		if len(s.UserAssignedIdentities) > 0 {
			r.Error(field.Invalid(path.Child("userAssignedIdentities"), len(s.UserAssignedIdentities), "only used with identity UserAssigned"))
		}
		return ""
	case capzv1.VMIdentityUserAssigned:
	default:
		r.Unsupported(ip, s.Identity, convert.MachineAPI+" (it assigns one user-assigned identity by name)")
		return ""
	}
	up := path.Child("userAssignedIdentities")
	if len(s.UserAssignedIdentities) != 1 {
		r.Error(field.Invalid(up, len(s.UserAssignedIdentities), "the Machine API assigns exactly one user-assigned identity"))
		return ""
	}
	id := s.UserAssignedIdentities[0].ProviderID
	if p.SubscriptionID == "" || rg == "" {
		r.Error(field.Invalid(up.Index(0).Child("providerID"), id, "the Machine API names the identity within the cluster's subscription and resource group, which are not known here: give the AzureCluster"))
		return ""
	}
	want := identityProviderID(p.SubscriptionID, rg, "")
	if len(id) <= len(want) || !strings.EqualFold(id[:len(want)], want) || strings.Contains(id[len(want):], "/") {
		r.Error(field.Invalid(up.Index(0).Child("providerID"), id, "the Machine API names an identity in the cluster's subscription and resource group: "+want+"<name>"))
		return ""
	}
	return id[len(want):]
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
