package azure

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	mapiv1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	capzv1 "sigs.k8s.io/cluster-api-provider-azure/api/v1beta1"

	"github.com/machina-dev/machina/internal/convert"
)

// ToInfra converts an AzureMachineProviderSpec into an AzureMachine spec.
func (p Platform) ToInfra(value *runtime.RawExtension, path *field.Path, r *convert.Report) (convert.InfraSpec, convert.MachineValues) {
	var ps mapiv1.AzureMachineProviderSpec
	if !convert.DecodeProviderSpec(value, &ps, path, r) {
		return nil, convert.MachineValues{}
	}
	var mv convert.MachineValues
	convert.CheckTypeMeta(ps.APIVersion, ps.Kind, convert.SpecType{APIVersion: mapiv1.GroupVersion.String(), Legacy: legacyAPIVersion, Kind: ProviderSpecKind}, path, r)
	if !reflect.ValueOf(ps.ObjectMeta).IsZero() {
		r.Warn(path.Child("metadata"), "ignored by the Machine API and dropped")
	}
	out := &capzv1.AzureMachineSpec{Identity: capzv1.VMIdentityNone}

	// Virtual machine.
	if ps.VMSize == "" {
		r.Error(field.Required(path.Child("vmSize"), ""))
	}
	out.VMSize = ps.VMSize
	out.Image = p.imageToCAPZ(ps.Image, path.Child("image"), r)
	out.SSHPublicKey = ps.SSHPublicKey
	out.AdditionalTags = tagsToCAPZ(ps.Tags, path.Child("tags"), r)
	out.SpotVMOptions = spotToCAPZ(ps.SpotVMOptions)
	out.Diagnostics = diagnosticsToCAPZ(ps.Diagnostics, path.Child("diagnostics"), r)
	if ps.CapacityReservationGroupID != "" {
		out.CapacityReservationGroupID = ptr.To(ps.CapacityReservationGroupID)
	}
	if ps.AvailabilitySet != "" {
		r.Unsupported(path.Child("availabilitySet"), ps.AvailabilitySet, "CAPZ (it makes its own availability sets, per MachineDeployment, in regions without zones)")
	}
	mv.FailureDomain = ps.Zone

	// Storage and security.
	out.OSDisk = osDiskToCAPZ(ps.OSDisk, path.Child("osDisk"), r)
	out.DataDisks = dataDisksToCAPZ(ps.DataDisks, path.Child("dataDisks"), r)
	out.AdditionalCapabilities = ultraSSDToCAPZ(ps.UltraSSDCapability, ps.DataDisks, path.Child("ultraSSDCapability"), r)
	out.SecurityProfile = securityToCAPZ(ps.SecurityProfile, ps.OSDisk, path, r)

	// Secrets.
	switch us := ps.UserDataSecret; {
	case us == nil || us.Name == "":
		r.Error(field.Required(path.Child("userDataSecret", "name"), "Cluster API Machines need bootstrap data (spec.bootstrap.dataSecretName)"))
	default:
		mv.DataSecretName = ptr.To(us.Name)
		p.checkUserDataNamespace(us.Namespace, path.Child("userDataSecret", "namespace"), r)
	}
	p.checkCredentials(&ps, path.Child("credentialsSecret"), r)

	// Cluster-wide values and network.
	p.clusterValuesToCAPZ(&ps, path, r)
	out.NetworkInterfaces = nicToCAPZ(&ps, path, r)
	if ps.Subnet != "" {
		p.checkIPv6Config(ps.Subnet, path.Child("subnet"), r)
	}
	out.AllocatePublicIP = ps.PublicIP
	if ps.ManagedIdentity != "" {
		out.Identity, out.UserAssignedIdentities = p.identityToCAPZ(&ps, path.Child("managedIdentity"), r)
	}
	return out, mv
}

// checkUserDataNamespace: the actuator reads the user data secret from the Machine's own
// namespace whatever the reference says.
func (p Platform) checkUserDataNamespace(ns string, path *field.Path, r *convert.Report) {
	switch ns {
	case "":
	case p.secretNamespace():
		r.Warn(path, "dropped: the bootstrap data secret is always in the Machine's namespace")
	default:
		r.Error(field.Invalid(path, ns, "the Machine API reads the user data secret from the Machine's namespace ("+p.secretNamespace()+"), not from this one"))
	}
}

// checkCredentials accepts the cluster's Machine API credentials secret: CAPZ takes
// credentials from the AzureCluster's identityRef, one per cluster.
func (p Platform) checkCredentials(ps *mapiv1.AzureMachineProviderSpec, path *field.Path, r *convert.Report) {
	cs := ps.CredentialsSecret
	if cs == nil || cs.Name == "" {
		r.Warn(path, "unset; CAPZ uses the AzureCluster's identity, and converting back sets %s/%s", p.secretNamespace(), p.credentialsSecret())
		return
	}
	if cs.Name != p.credentialsSecret() {
		r.Error(field.Invalid(path.Child("name"), cs.Name, "CAPZ takes credentials from the AzureCluster's identityRef, one per cluster; this cluster's Machine API credentials secret is "+p.credentialsSecret()))
	}
	switch cs.Namespace {
	case p.secretNamespace():
	case "":
		r.Warn(path.Child("namespace"), "unset; read as %s, which converting back writes", p.secretNamespace())
	default:
		r.Error(field.Invalid(path.Child("namespace"), cs.Namespace, "this cluster's Machine API credentials secret is in "+p.secretNamespace()))
	}
}

// clusterValuesToCAPZ checks the values CAPZ takes from the AzureCluster rather than from
// each machine: they must be the cluster's.
func (p Platform) clusterValuesToCAPZ(ps *mapiv1.AzureMachineProviderSpec, path *field.Path, r *convert.Report) {
	const back = "converting back leaves it unset, and the actuator then uses the cluster's"
	clusterValue(ps.Location, p.Location, "location", "AzureCluster spec.location", back, path.Child("location"), r)
	clusterValue(ps.ResourceGroup, p.ResourceGroup, "resource group", "AzureCluster spec.resourceGroup", back, path.Child("resourceGroup"), r)
	clusterValue(ps.NetworkResourceGroup, p.networkResourceGroup(), "network resource group", "AzureCluster spec.networkSpec.vnet.resourceGroup", back, path.Child("networkResourceGroup"), r)
	const needed = "converting back needs it: give the AzureCluster"
	if ps.Vnet == "" {
		r.Error(field.Required(path.Child("vnet"), "the actuator needs the virtual network"))
	} else {
		clusterValue(ps.Vnet, p.Vnet, "virtual network", "AzureCluster spec.networkSpec.vnet.name", needed, path.Child("vnet"), r)
	}
	if ps.NatRule != nil {
		r.Unsupported(path.Child("natRule"), *ps.NatRule, "CAPZ (it attaches no inbound NAT rule a Machine chooses)")
	}
	if p.controlPlane {
		p.controlPlaneLBsToCAPZ(ps, path, r)
		return
	}
	p.workerLBsToCAPZ(ps, path, r)
}

// workerLBsToCAPZ checks that CAPZ adds a worker's interface to the load balancers its
// providerSpec names.
func (p Platform) workerLBsToCAPZ(ps *mapiv1.AzureMachineProviderSpec, path *field.Path, r *convert.Report) {
	const needed = "converting back needs it: give the AzureCluster"
	lbp := path.Child("publicLoadBalancer")
	switch lb := p.OutboundLoadBalancer; {
	case lb == nil && ps.PublicLoadBalancer != "":
		r.Warn(lbp, "not checked: the AzureCluster's node outbound load balancer is not known here; %s", needed)
	case lb != nil && *lb != ps.PublicLoadBalancer:
		r.Error(field.Invalid(lbp, ps.PublicLoadBalancer, "CAPZ adds every worker's interface to the AzureCluster's node outbound load balancer ("+
			orNone(*lb)+", spec.networkSpec.nodeOutboundLB), not per Machine; the Machine's must be the same"))
	}
	if ps.InternalLoadBalancer != "" {
		r.Error(field.Invalid(path.Child("internalLoadBalancer"), ps.InternalLoadBalancer, "CAPZ adds only control-plane Machines to an internal load balancer (the AzureCluster's API server load balancer), "+
			"and this Machine is not one: its role (label "+convert.MachineAPIRoleLabel+") is not master"))
	}
	p.dualStackLBsToCAPZ(ps, path, r)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// clusterValue checks a providerSpec value against the cluster's (cluster, "" when not
// known), reading an unset one as the cluster's, as the actuator does. unknownNote says what
// converting back does when the cluster's is not known.
func clusterValue(v, cluster, what, source, unknownNote string, path *field.Path, r *convert.Report) {
	switch {
	case v == "" && cluster == "":
	case cluster == "":
		r.Warn(path, "not checked: the cluster's %s (%s) is not known here; %s", what, source, unknownNote)
	case v == "":
		r.Warn(path, "unset; the cluster's %s %s applies, which converting back writes", what, cluster)
	case !strings.EqualFold(v, cluster):
		r.Error(field.Invalid(path, v, fmt.Sprintf("the cluster's %s is %s (%s); CAPZ keeps one per cluster, so a Machine with another cannot be converted", what, cluster, source)))
	case v != cluster:
		r.Warn(path, "Azure names ignore case; converting back writes the cluster's spelling %s", cluster)
	}
}

// nicToCAPZ converts the one network interface the actuator makes.
func nicToCAPZ(ps *mapiv1.AzureMachineProviderSpec, path *field.Path, r *convert.Report) []capzv1.NetworkInterface {
	if ps.SecurityGroup != "" {
		r.Unsupported(path.Child("securityGroup"), ps.SecurityGroup, "CAPZ (it attaches network security groups to subnets, AzureCluster spec.networkSpec.subnets[].securityGroup)")
	}
	if len(ps.ApplicationSecurityGroups) > 0 {
		r.Unsupported(path.Child("applicationSecurityGroups"), ps.ApplicationSecurityGroups, "CAPZ")
	}
	if ps.Subnet == "" {
		r.Error(field.Required(path.Child("subnet"), "the actuator needs a subnet"))
		return nil
	}
	return []capzv1.NetworkInterface{{SubnetName: ps.Subnet, PrivateIPConfigs: 1, AcceleratedNetworking: ptr.To(ps.AcceleratedNetworking)}}
}

// identityToCAPZ turns the managed identity, which the actuator looks up by name in the
// Machine's resource group and subscription, into a user-assigned identity.
func (p Platform) identityToCAPZ(ps *mapiv1.AzureMachineProviderSpec, path *field.Path, r *convert.Report) (capzv1.VMIdentity, []capzv1.UserAssignedIdentity) {
	rg := ps.ResourceGroup
	if rg == "" {
		rg = p.ResourceGroup
	}
	switch {
	case strings.Contains(ps.ManagedIdentity, "/"):
		r.Error(field.Invalid(path, ps.ManagedIdentity, "the actuator takes the name of an identity in the Machine's resource group"))
	case p.SubscriptionID == "" || rg == "":
		r.Error(field.Invalid(path, ps.ManagedIdentity, "CAPZ names identities by resource ID; the cluster's subscription and resource group are not known here: give the AzureCluster"))
	default:
		return capzv1.VMIdentityUserAssigned, []capzv1.UserAssignedIdentity{{ProviderID: identityProviderID(p.SubscriptionID, rg, ps.ManagedIdentity)}}
	}
	return capzv1.VMIdentityNone, nil
}

func identityProviderID(subscription, rg, name string) string {
	return "azure:///subscriptions/" + subscription + "/resourceGroups/" + rg + "/providers/Microsoft.ManagedIdentity/userAssignedIdentities/" + name
}

// tagsToCAPZ copies the tags; Azure tag keys ignore case, and the actuator refuses keys that
// differ only in case.
func tagsToCAPZ(tags map[string]string, path *field.Path, r *convert.Report) capzv1.Tags {
	if len(tags) == 0 {
		return nil
	}
	out := make(capzv1.Tags, len(tags))
	seen := map[string]string{}
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "" {
			r.Error(field.Required(path.Key(k), "tags need a name"))
			continue
		}
		if other, dup := seen[strings.ToLower(k)]; dup {
			r.Error(field.Duplicate(path.Key(k), "differs from "+other+" only in case"))
			continue
		}
		seen[strings.ToLower(k)] = k
		out[k] = tags[k]
	}
	return out
}

// spotToCAPZ converts the Spot options; the actuator always deallocates evicted VMs.
func spotToCAPZ(s *mapiv1.SpotVMOptions) *capzv1.SpotVMOptions {
	if s == nil {
		return nil
	}
	out := &capzv1.SpotVMOptions{EvictionPolicy: ptr.To(capzv1.SpotEvictionPolicyDeallocate)}
	if s.MaxPrice != nil {
		out.MaxPrice = ptr.To(s.MaxPrice.DeepCopy())
	}
	return out
}

// diagnosticsToCAPZ states the boot diagnostics: without them the actuator leaves them off,
// where CAPZ would turn on managed ones.
func diagnosticsToCAPZ(d mapiv1.AzureDiagnostics, path *field.Path, r *convert.Report) *capzv1.Diagnostics {
	b := d.Boot
	if b == nil {
		return &capzv1.Diagnostics{Boot: &capzv1.BootDiagnostics{StorageAccountType: capzv1.DisabledDiagnosticsStorage}}
	}
	bp := path.Child("boot")
	switch b.StorageAccountType {
	case mapiv1.AzureManagedAzureDiagnosticsStorage:
		if b.CustomerManaged != nil {
			r.Warn(bp.Child("customerManaged"), "dropped: only used with CustomerManaged storage")
		}
		return &capzv1.Diagnostics{Boot: &capzv1.BootDiagnostics{StorageAccountType: capzv1.ManagedDiagnosticsStorage}}
	case mapiv1.CustomerManagedAzureDiagnosticsStorage:
		if b.CustomerManaged == nil || b.CustomerManaged.StorageAccountURI == "" {
			r.Error(field.Required(bp.Child("customerManaged", "storageAccountURI"), "required for CustomerManaged storage"))
			return nil
		}
		return &capzv1.Diagnostics{Boot: &capzv1.BootDiagnostics{StorageAccountType: capzv1.UserManagedDiagnosticsStorage,
			UserManaged: &capzv1.UserManagedBootDiagnostics{StorageAccountURI: b.CustomerManaged.StorageAccountURI}}}
	default:
		r.Error(field.NotSupported(bp.Child("storageAccountType"), b.StorageAccountType, []string{string(mapiv1.AzureManagedAzureDiagnosticsStorage), string(mapiv1.CustomerManagedAzureDiagnosticsStorage)}))
		return nil
	}
}
