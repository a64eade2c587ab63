package azure

import (
	"fmt"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	mapiv1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	capzv1 "sigs.k8s.io/cluster-api-provider-azure/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/machina-dev/machina/internal/convert"
	ct "github.com/machina-dev/machina/internal/convert/converttest"
)

const (
	cluster      = "ci-op-4x7kq-9bd2c"
	subscription = "53b8f551-f0fc-4bea-8cba-6d1fefd54c8a"
	location     = "centralus"
	rg           = cluster + "-rg"
)

var testPlatform = Platform{Location: location, SubscriptionID: subscription, ResourceGroup: rg, Vnet: cluster + "-vnet", OutboundLoadBalancer: ptr.To(cluster)}

var testCtx = convert.Context{ClusterName: cluster, Platform: testPlatform, Namespaces: convert.OpenShiftNamespaces}

var suite = ct.Suite[*mapiv1.AzureMachineProviderSpec, *capzv1.AzureMachineSpec]{
	Checker:            ct.Checker{Ctx: testCtx, DecodeProviderSpec: ct.DecodeJSON[mapiv1.AzureMachineProviderSpec]},
	ProviderSpec:       genProviderSpec,
	RandomProviderSpec: randomProviderSpec,
	ProviderID:         genProviderID,
	InfraSpec:          genSpec,
	RandomCAPIMachine:  randomCAPIMachine,
	MinAcceptedPercent: 5,
	ProviderSpecSeeds: []string{
		`{"apiVersion":"machine.openshift.io/v1beta1","kind":"AzureMachineProviderSpec","location":"centralus","vmSize":"Standard_D4s_v3","image":{"resourceID":"/resourceGroups/x-rg/providers/Microsoft.Compute/galleries/gallery_x/images/x-gen2/versions/latest"},"osDisk":{"osType":"Linux","diskSizeGB":128,"managedDisk":{"storageAccountType":"Premium_LRS"}},"subnet":"x-worker-subnet","vnet":"x-vnet","userDataSecret":{"name":"worker-user-data"},"publicIP":false}`,
		`{"image":{"publisher":"redhat","offer":"rh-ocp-worker","sku":"","version":"4.15"},"dataDisks":[{"nameSuffix":"-bad","lun":64,"diskSizeGB":1}]}`,
		`{"securityProfile":{"settings":{"securityType":"TrustedLaunch"}},"spotVMOptions":{"maxPrice":"-1"}}`,
		`null`,
	},
}

// dualStackSuite runs the same properties on a dual-stack cluster whose AzureCluster's virtual
// network lists an IPv6 CIDR and which has no node outbound load balancer (user-defined
// routing): there the Machines that join no load balancer convert, and only they.
var dualStackSuite = func() ct.Suite[*mapiv1.AzureMachineProviderSpec, *capzv1.AzureMachineSpec] {
	p := testPlatform
	p.IPFamily, p.VnetIPv6, p.OutboundLoadBalancer = configv1.DualStackIPv6Primary, ptr.To(true), ptr.To("")
	s := suite
	s.Ctx.Platform = p
	s.ProviderSpec = func(g *ct.Gen) *mapiv1.AzureMachineProviderSpec {
		ps := genProviderSpec(g)
		ps.PublicLoadBalancer = ""
		return ps
	}
	s.RandomProviderSpec = func(g *ct.Gen) *mapiv1.AzureMachineProviderSpec {
		ps := randomProviderSpec(g)
		if g.Intn(4) > 0 {
			ps.PublicLoadBalancer = ""
		}
		return ps
	}
	return s
}()

// TestRoundTrip runs the shared round-trip properties (see converttest.Suite) on Azure objects.
func TestRoundTrip(t *testing.T) { suite.Run(t) }

// TestRoundTripDualStack runs them on a dual-stack cluster.
func TestRoundTripDualStack(t *testing.T) { dualStackSuite.Run(t) }

func FuzzRoundTrip(f *testing.F) { suite.FuzzRoundTrip(f) }

func FuzzProviderSpecBytes(f *testing.F) { suite.FuzzProviderSpecBytes(f) }

func genProviderID(g *ct.Gen) string {
	return ct.Pick(g, "", fmt.Sprintf("azure:///subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachines/%s-worker-%s", subscription, rg, cluster, g.Token()))
}

func galleryImage(g *ct.Gen) string {
	return fmt.Sprintf("/resourceGroups/%s/providers/Microsoft.Compute/galleries/gallery_ci_op/images/%s/versions/%s", rg, ct.Pick(g, cluster, cluster+"-gen2"), ct.Pick(g, "latest", "417.94.20250101"))
}

func genImage(g *ct.Gen) mapiv1.Image {
	if g.Maybe() {
		return mapiv1.Image{ResourceID: galleryImage(g)}
	}
	return mapiv1.Image{Publisher: "redhat", Offer: "rh-ocp-worker", SKU: ct.Pick(g, "rh-ocp-worker", "rh-ocp-worker-gen1"), Version: "4.15.2024072409",
		Type: ct.Pick(g, mapiv1.AzureImageTypeMarketplaceWithPlan, mapiv1.AzureImageTypeMarketplaceNoPlan)}
}

func genOSDisk(g *ct.Gen) mapiv1.OSDisk {
	d := mapiv1.OSDisk{OSType: ct.Pick(g, osLinux, osWindows), DiskSizeGB: int32(30 + g.Intn(1000)),
		ManagedDisk: mapiv1.OSDiskManagedDiskParameters{StorageAccountType: ct.Pick(g, "", "Premium_LRS", "StandardSSD_LRS")},
		CachingType: ct.Pick(g, cachingNone, cachingReadOnly, cachingReadWrite)}
	if g.Maybe() {
		d.ManagedDisk.DiskEncryptionSet = &mapiv1.DiskEncryptionSetParameters{ID: "/subscriptions/" + subscription + "/resourceGroups/" + rg + "/providers/Microsoft.Compute/diskEncryptionSets/des"}
	}
	if g.Intn(4) == 0 {
		d.DiskSettings.EphemeralStorageLocation, d.CachingType = ephemeralLocal, cachingReadOnly
	}
	return d
}

func genDataDisks(g *ct.Gen) []mapiv1.DataDisk {
	var out []mapiv1.DataDisk
	for i := range g.Intn(3) {
		d := mapiv1.DataDisk{NameSuffix: fmt.Sprintf("data%d", i), DiskSizeGB: int32(4 + g.Intn(500)), Lun: int32(i * 3),
			DeletionPolicy: mapiv1.DiskDeletionPolicyTypeDelete, CachingType: ct.Pick(g, mapiv1.CachingTypeNone, mapiv1.CachingTypeReadOnly, mapiv1.CachingTypeReadWrite)}
		switch g.Intn(3) {
		case 1:
			d.ManagedDisk.StorageAccountType = mapiv1.StorageAccountPremiumLRS
		case 2:
			d.ManagedDisk.StorageAccountType, d.CachingType = mapiv1.StorageAccountUltraSSDLRS, mapiv1.CachingTypeNone
		}
		out = append(out, d)
	}
	return out
}

func hasUltra(disks []mapiv1.DataDisk) bool {
	for _, d := range disks {
		if d.ManagedDisk.StorageAccountType == mapiv1.StorageAccountUltraSSDLRS {
			return true
		}
	}
	return false
}

func genSecurity(g *ct.Gen, ps *mapiv1.AzureMachineProviderSpec) {
	onOff := func() mapiv1.UEFISettings {
		u := mapiv1.UEFISettings{SecureBoot: ct.Pick(g, mapiv1.SecureBootPolicyEnabled, mapiv1.SecureBootPolicyDisabled), VirtualizedTrustedPlatformModule: mapiv1.VirtualizedTrustedPlatformModulePolicyEnabled}
		if u.SecureBoot == mapiv1.SecureBootPolicyEnabled && g.Maybe() {
			u.VirtualizedTrustedPlatformModule = mapiv1.VirtualizedTrustedPlatformModulePolicyDisabled
		}
		return u
	}
	switch g.Intn(4) {
	case 1:
		ps.SecurityProfile = &mapiv1.SecurityProfile{EncryptionAtHost: ptr.To(g.Maybe())}
	case 2:
		ps.SecurityProfile = &mapiv1.SecurityProfile{EncryptionAtHost: g.BoolPtr(), Settings: mapiv1.SecuritySettings{
			SecurityType: mapiv1.SecurityTypesTrustedLaunch, TrustedLaunch: &mapiv1.TrustedLaunch{UEFISettings: onOff()}}}
	case 3:
		ps.OSDisk.ManagedDisk.SecurityProfile.SecurityEncryptionType = mapiv1.SecurityEncryptionTypesVMGuestStateOnly
		u := mapiv1.UEFISettings{SecureBoot: ct.Pick(g, mapiv1.SecureBootPolicyEnabled, mapiv1.SecureBootPolicyDisabled), VirtualizedTrustedPlatformModule: mapiv1.VirtualizedTrustedPlatformModulePolicyEnabled}
		ps.SecurityProfile = &mapiv1.SecurityProfile{Settings: mapiv1.SecuritySettings{SecurityType: mapiv1.SecurityTypesConfidentialVM, ConfidentialVM: &mapiv1.ConfidentialVM{UEFISettings: u}}}
		if u.SecureBoot == mapiv1.SecureBootPolicyEnabled && g.Maybe() {
			ps.OSDisk.ManagedDisk.SecurityProfile.SecurityEncryptionType = mapiv1.SecurityEncryptionTypesDiskWithVMGuestState
			ps.OSDisk.ManagedDisk.SecurityProfile.DiskEncryptionSet.ID = "/subscriptions/" + subscription + "/resourceGroups/" + rg + "/providers/Microsoft.Compute/diskEncryptionSets/cvm"
		}
	}
}

// genProviderSpec returns an AzureMachineProviderSpec the converter accepts without warnings,
// in the installer's shape with variations.
func genProviderSpec(g *ct.Gen) *mapiv1.AzureMachineProviderSpec {
	ps := &mapiv1.AzureMachineProviderSpec{
		UserDataSecret:        &corev1.SecretReference{Name: ct.Pick(g, "worker-user-data", g.Token())},
		CredentialsSecret:     &corev1.SecretReference{Name: DefaultCredentialsSecret, Namespace: DefaultSecretNamespace},
		Location:              location,
		VMSize:                ct.Pick(g, "Standard_D4s_v3", "Standard_D8s_v5", "Standard_NC4as_T4_v3"),
		Image:                 genImage(g),
		OSDisk:                genOSDisk(g),
		DataDisks:             genDataDisks(g),
		SSHPublicKey:          ct.Pick(g, "", "c3NoLXJzYSBBQUFBQjNOemFDMXljMkVBQUFBREFRQUJBQUFCQVFD"),
		PublicIP:              g.Maybe(),
		Tags:                  g.Map(),
		Subnet:                ct.Pick(g, cluster+"-worker-subnet", "byo-subnet"),
		PublicLoadBalancer:    cluster,
		ManagedIdentity:       ct.Pick(g, "", cluster+"-identity"),
		Vnet:                  cluster + "-vnet",
		Zone:                  ct.Pick(g, "", "1", "2", "3"),
		NetworkResourceGroup:  rg,
		ResourceGroup:         rg,
		AcceleratedNetworking: g.Maybe(),
	}
	ps.APIVersion, ps.Kind = mapiv1.GroupVersion.String(), ProviderSpecKind
	ps.UltraSSDCapability = ct.Pick(g, "", mapiv1.AzureUltraSSDCapabilityEnabled, mapiv1.AzureUltraSSDCapabilityDisabled)
	if ps.UltraSSDCapability == "" && hasUltra(ps.DataDisks) {
		ps.UltraSSDCapability = mapiv1.AzureUltraSSDCapabilityEnabled
	}
	if g.Maybe() {
		ps.SpotVMOptions = &mapiv1.SpotVMOptions{}
		if g.Maybe() {
			ps.SpotVMOptions.MaxPrice = ptr.To(resource.MustParse(ct.Pick(g, "-1", "0.25")))
		}
	}
	switch g.Intn(3) {
	case 1:
		ps.Diagnostics.Boot = &mapiv1.AzureBootDiagnostics{StorageAccountType: mapiv1.AzureManagedAzureDiagnosticsStorage}
	case 2:
		ps.Diagnostics.Boot = &mapiv1.AzureBootDiagnostics{StorageAccountType: mapiv1.CustomerManagedAzureDiagnosticsStorage,
			CustomerManaged: &mapiv1.AzureCustomerManagedBootDiagnostics{StorageAccountURI: "https://diag.blob.core.windows.net/"}}
	}
	if g.Intn(4) == 0 {
		ps.CapacityReservationGroupID = "/subscriptions/" + subscription + "/resourceGroups/" + rg + "/providers/Microsoft.Compute/capacityReservationGroups/crg"
	}
	genSecurity(g, ps)
	return ps
}

// randomProviderSpec is an arbitrary providerSpec, nudged half of the time towards values the
// converter accepts so both outcomes are exercised.
func randomProviderSpec(g *ct.Gen) *mapiv1.AzureMachineProviderSpec {
	var ps mapiv1.AzureMachineProviderSpec
	g.Fill.Fill(&ps)
	if g.Maybe() {
		return &ps
	}
	ok := genProviderSpec(g)
	for i := g.Intn(4) - 1; i >= 0; i-- { // a quarter of them unchanged
		switch g.Intn(8) {
		case 0:
			ok.Image = ps.Image
		case 1:
			ok.OSDisk = ps.OSDisk
		case 2:
			ok.DataDisks, ok.UltraSSDCapability = ps.DataDisks, ps.UltraSSDCapability
		case 3:
			ok.SecurityProfile = ps.SecurityProfile
		case 4:
			ok.Location, ok.ResourceGroup, ok.NetworkResourceGroup, ok.Vnet = ps.Location, ps.ResourceGroup, ps.NetworkResourceGroup, ps.Vnet
		case 5:
			ok.PublicLoadBalancer, ok.InternalLoadBalancer, ok.NatRule, ok.SecurityGroup = ps.PublicLoadBalancer, ps.InternalLoadBalancer, ps.NatRule, ps.SecurityGroup
		case 6:
			ok.CredentialsSecret, ok.UserDataSecret, ok.ManagedIdentity = ps.CredentialsSecret, ps.UserDataSecret, ps.ManagedIdentity
		case 7:
			ok.TypeMeta, ok.Tags, ok.Diagnostics, ok.SpotVMOptions = ps.TypeMeta, ps.Tags, ps.Diagnostics, ps.SpotVMOptions
		}
	}
	return ok
}

// genSpec returns an AzureMachine spec the converter accepts without warnings, in the form
// CAPZ's CRD admits unchanged.
func genSpec(g *ct.Gen) *capzv1.AzureMachineSpec {
	s := &capzv1.AzureMachineSpec{
		VMSize:           ct.Pick(g, "Standard_D4s_v3", "Standard_D8s_v5"),
		Identity:         capzv1.VMIdentityNone,
		SSHPublicKey:     ct.Pick(g, "", "c3NoLXJzYSBBQUFB"),
		AllocatePublicIP: g.Maybe(),
		OSDisk: capzv1.OSDisk{OSType: ct.Pick(g, osLinux, osWindows), DiskSizeGB: ptr.To(int32(30 + g.Intn(500))),
			CachingType: ct.Pick(g, cachingNone, cachingReadOnly, cachingReadWrite)},
		Diagnostics:       &capzv1.Diagnostics{Boot: &capzv1.BootDiagnostics{StorageAccountType: ct.Pick(g, capzv1.DisabledDiagnosticsStorage, capzv1.ManagedDiagnosticsStorage)}},
		NetworkInterfaces: []capzv1.NetworkInterface{{SubnetName: "workers", PrivateIPConfigs: 1, AcceleratedNetworking: ptr.To(g.Maybe())}},
	}
	for _, k := range sortedKeys(g.Map()) {
		if s.AdditionalTags == nil {
			s.AdditionalTags = capzv1.Tags{}
		}
		s.AdditionalTags[k] = g.Token()
	}
	if g.Maybe() {
		s.Image = &capzv1.Image{ID: ptr.To("/subscriptions/" + subscription + galleryImage(g))}
	} else {
		s.Image = &capzv1.Image{Marketplace: &capzv1.AzureMarketplaceImage{ImagePlan: capzv1.ImagePlan{Publisher: "redhat", Offer: "rh-ocp-worker", SKU: "rh-ocp-worker"},
			Version: "4.15.2024072409", ThirdPartyImage: g.Maybe()}}
	}
	if g.Maybe() {
		s.OSDisk.ManagedDisk = &capzv1.ManagedDiskParameters{StorageAccountType: "Premium_LRS"}
	}
	if g.Maybe() {
		s.Identity = capzv1.VMIdentityUserAssigned
		s.UserAssignedIdentities = []capzv1.UserAssignedIdentity{{ProviderID: identityProviderID(subscription, rg, "workers-"+g.Token())}}
	}
	for i := range g.Intn(3) {
		d := capzv1.DataDisk{NameSuffix: fmt.Sprintf("disk%d", i), DiskSizeGB: int32(4 + g.Intn(100)), Lun: ptr.To(int32(i)), CachingType: cachingNone}
		if g.Maybe() {
			d.ManagedDisk = &capzv1.ManagedDiskParameters{StorageAccountType: "StandardSSD_LRS"}
		}
		s.DataDisks = append(s.DataDisks, d)
	}
	if g.Maybe() {
		s.AdditionalCapabilities = &capzv1.AdditionalCapabilities{UltraSSDEnabled: ptr.To(g.Maybe())}
	}
	switch g.Intn(3) {
	case 1:
		s.SpotVMOptions = &capzv1.SpotVMOptions{EvictionPolicy: ptr.To(capzv1.SpotEvictionPolicyDeallocate)}
	case 2:
		s.SecurityProfile = &capzv1.SecurityProfile{EncryptionAtHost: g.BoolPtr(), SecurityType: capzv1.SecurityTypesTrustedLaunch,
			UefiSettings: &capzv1.UefiSettings{SecureBootEnabled: ptr.To(true), VTpmEnabled: ptr.To(g.Maybe())}}
	}
	return s
}

// randomCAPIMachine is an arbitrary Cluster API Machine and AzureMachine spec, each nudged
// most of the time towards values the converter accepts.
func randomCAPIMachine(g *ct.Gen) (*clusterv1.Machine, *capzv1.AzureMachineSpec, string) {
	var m clusterv1.Machine
	var spec capzv1.AzureMachineSpec
	g.Fill.Fill(&m)
	g.Fill.Fill(&spec)
	pid := genProviderID(g)
	if g.Intn(3) > 0 {
		m = *g.CAPIMachine(testCtx, pid)
	}
	if g.Intn(3) > 0 {
		ok := genSpec(g)
		switch g.Intn(8) { // 6 and 7: unchanged
		case 0:
			ok.Image = spec.Image
		case 1:
			ok.OSDisk, ok.DataDisks = spec.OSDisk, spec.DataDisks
		case 2:
			ok.NetworkInterfaces, ok.SubnetName, ok.AcceleratedNetworking = spec.NetworkInterfaces, spec.SubnetName, spec.AcceleratedNetworking //nolint:staticcheck // arbitrary input includes deprecated fields
		case 3:
			ok.Identity, ok.UserAssignedIdentities = spec.Identity, spec.UserAssignedIdentities
		case 4:
			ok.SecurityProfile, ok.Diagnostics, ok.SpotVMOptions = spec.SecurityProfile, spec.Diagnostics, spec.SpotVMOptions
		case 5:
			ok.VMExtensions, ok.DNSServers, ok.FailureDomain = spec.VMExtensions, spec.DNSServers, spec.FailureDomain
		}
		spec = *ok
	}
	return &m, &spec, m.Spec.ProviderID
}
