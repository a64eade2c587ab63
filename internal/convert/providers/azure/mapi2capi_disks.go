package azure

import (
	"regexp"
	"strings"

	mapiv1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	capzv1 "sigs.k8s.io/cluster-api-provider-azure/api/v1beta1"

	"github.com/machina-dev/machina/internal/convert"
)

// Caching types, the same words in both APIs.
const (
	cachingNone      = "None"
	cachingReadOnly  = "ReadOnly"
	cachingReadWrite = "ReadWrite"
	osLinux          = "Linux"
	osWindows        = "Windows"
	ephemeralLocal   = "Local"
)

var cachingTypes = []string{cachingNone, cachingReadOnly, cachingReadWrite}

// imageToCAPZ converts the image. The actuator reads resourceID relative to the cluster's
// subscription, which CAPZ's image ID states.
func (p Platform) imageToCAPZ(img mapiv1.Image, path *field.Path, r *convert.Report) *capzv1.Image {
	market := img.Publisher != "" || img.Offer != "" || img.SKU != "" || img.Version != ""
	if img.ResourceID != "" {
		return p.imageIDToCAPZ(img, market, path, r)
	}
	if !market {
		r.Error(field.Required(path, "a resourceID or marketplace publisher, offer, sku and version"))
		return nil
	}
	for name, v := range map[string]string{"publisher": img.Publisher, "offer": img.Offer, "sku": img.SKU, "version": img.Version} {
		if v == "" {
			r.Error(field.Required(path.Child(name), "marketplace images need a publisher, offer, sku and version"))
		}
	}
	third := false
	switch img.Type {
	case mapiv1.AzureImageTypeMarketplaceWithPlan:
		third = true
	case mapiv1.AzureImageTypeMarketplaceNoPlan:
	case "":
		r.Warn(path.Child("type"), "unset; read as MarketplaceNoPlan (no purchase plan), which converting back writes")
	default:
		r.Error(field.Invalid(path.Child("type"), img.Type, "an image of type ID needs a resourceID"))
	}
	return &capzv1.Image{Marketplace: &capzv1.AzureMarketplaceImage{
		ImagePlan: capzv1.ImagePlan{Publisher: img.Publisher, Offer: img.Offer, SKU: img.SKU},
		Version:   img.Version, ThirdPartyImage: third}}
}

func (p Platform) imageIDToCAPZ(img mapiv1.Image, market bool, path *field.Path, r *convert.Report) *capzv1.Image {
	switch img.Type {
	case "":
	case mapiv1.AzureImageTypeID:
		r.Warn(path.Child("type"), "ID is what a resourceID means; converting back leaves type unset")
	case mapiv1.AzureImageTypeMarketplaceWithPlan:
		r.Error(field.Invalid(path.Child("type"), img.Type, "CAPZ cannot give a purchase plan to an image named by resource ID"))
	default:
		r.Warn(path.Child("type"), "dropped: with a resourceID the actuator uses no purchase plan")
	}
	if market {
		r.Warn(path, "publisher, offer, sku and version dropped: the actuator uses resourceID")
	}
	id := img.ResourceID
	switch {
	case strings.HasPrefix(strings.ToLower(id), "/subscriptions/"):
		r.Error(field.Invalid(path.Child("resourceID"), id, "the actuator prefixes the cluster's subscription; name the image from /resourceGroups/"))
	case !strings.HasPrefix(id, "/"):
		r.Error(field.Invalid(path.Child("resourceID"), id, "must be a resource ID from /resourceGroups/"))
	case p.SubscriptionID == "":
		r.Error(field.Invalid(path.Child("resourceID"), id, "CAPZ takes the image's full resource ID, and the cluster's subscription is not known here: give the AzureCluster"))
	default:
		return &capzv1.Image{ID: ptr.To("/subscriptions/" + p.SubscriptionID + id)}
	}
	return nil
}

// osDiskToCAPZ converts the OS disk, stating what CAPZ's CRD would otherwise default
// differently from Azure: the caching.
func osDiskToCAPZ(d mapiv1.OSDisk, path *field.Path, r *convert.Report) capzv1.OSDisk {
	var out capzv1.OSDisk
	switch d.OSType {
	case osLinux, osWindows:
		out.OSType = d.OSType
	case "":
		r.Warn(path.Child("osType"), "unset; read as Linux, which converting back writes")
		out.OSType = osLinux
	default:
		r.Error(field.NotSupported(path.Child("osType"), d.OSType, []string{osLinux, osWindows}))
	}
	if d.DiskSizeGB <= 0 {
		r.Error(field.Invalid(path.Child("diskSizeGB"), d.DiskSizeGB, "CAPZ needs an explicit size"))
	} else {
		out.DiskSizeGB = ptr.To(d.DiskSizeGB)
	}
	out.ManagedDisk = managedOSDiskToCAPZ(d.ManagedDisk, path.Child("managedDisk"), r)
	ephemeral := false
	switch loc := d.DiskSettings.EphemeralStorageLocation; loc {
	case "":
	case ephemeralLocal:
		out.DiffDiskSettings = &capzv1.DiffDiskSettings{Option: ephemeralLocal}
		ephemeral = true
	default:
		r.Error(field.NotSupported(path.Child("diskSettings", "ephemeralStorageLocation"), loc, []string{ephemeralLocal}))
	}
	switch c := d.CachingType; c {
	case cachingNone, cachingReadOnly, cachingReadWrite:
		out.CachingType = c
	case "":
		def := cachingReadWrite
		if ephemeral {
			def = cachingReadOnly
		}
		r.Warn(path.Child("cachingType"), "unset; Azure's default for this OS disk is %s, which CAPZ must state (its CRD writes None when unset) and converting back writes", def)
		out.CachingType = def
	default:
		r.Error(field.NotSupported(path.Child("cachingType"), c, cachingTypes))
	}
	return out
}

func managedOSDiskToCAPZ(m mapiv1.OSDiskManagedDiskParameters, path *field.Path, r *convert.Report) *capzv1.ManagedDiskParameters {
	out := &capzv1.ManagedDiskParameters{StorageAccountType: m.StorageAccountType}
	out.DiskEncryptionSet = desToCAPZ(m.DiskEncryptionSet, path.Child("diskEncryptionSet"), r)
	sp, spp := m.SecurityProfile, path.Child("securityProfile")
	switch t := sp.SecurityEncryptionType; t {
	case "":
		if sp.DiskEncryptionSet.ID != "" {
			r.Warn(spp.Child("diskEncryptionSet"), "dropped: the actuator uses it only with a securityEncryptionType")
		}
	case mapiv1.SecurityEncryptionTypesVMGuestStateOnly, mapiv1.SecurityEncryptionTypesDiskWithVMGuestState:
		out.SecurityProfile = &capzv1.VMDiskSecurityProfile{SecurityEncryptionType: capzv1.SecurityEncryptionType(t)}
		if sp.DiskEncryptionSet.ID != "" {
			out.SecurityProfile.DiskEncryptionSet = &capzv1.DiskEncryptionSetParameters{ID: sp.DiskEncryptionSet.ID}
		}
	default:
		r.Error(field.NotSupported(spp.Child("securityEncryptionType"), t, []string{string(mapiv1.SecurityEncryptionTypesVMGuestStateOnly), string(mapiv1.SecurityEncryptionTypesDiskWithVMGuestState)}))
	}
	if *out == (capzv1.ManagedDiskParameters{}) {
		return nil
	}
	return out
}

func desToCAPZ(d *mapiv1.DiskEncryptionSetParameters, path *field.Path, r *convert.Report) *capzv1.DiskEncryptionSetParameters {
	if d == nil {
		return nil
	}
	if d.ID == "" {
		r.Error(field.Required(path.Child("id"), ""))
		return nil
	}
	return &capzv1.DiskEncryptionSetParameters{ID: d.ID}
}

// nameSuffixPattern is what the actuator accepts as a data disk's name suffix.
var nameSuffixPattern = regexp.MustCompile(`^[a-zA-Z0-9](?:[\w\.-]*[a-zA-Z0-9])?$`)

// dataDisksToCAPZ converts the data disks, checking what the actuator checks before it
// creates any: CAPZ names them the same way (<machine>_<nameSuffix>).
func dataDisksToCAPZ(disks []mapiv1.DataDisk, path *field.Path, r *convert.Report) []capzv1.DataDisk {
	var out []capzv1.DataDisk
	suffixes, luns := map[string]bool{}, map[int32]bool{}
	for i, d := range disks {
		dp := path.Index(i)
		n := len(r.Errors)
		switch {
		case !nameSuffixPattern.MatchString(d.NameSuffix) || len(d.NameSuffix) > 78:
			r.Error(field.Invalid(dp.Child("nameSuffix"), d.NameSuffix, "letters, digits, '_', '.' and '-', starting and ending with a letter or digit, at most 78"))
		case suffixes[d.NameSuffix]:
			r.Error(field.Duplicate(dp.Child("nameSuffix"), d.NameSuffix))
		}
		suffixes[d.NameSuffix] = true
		if d.DiskSizeGB < 4 {
			r.Error(field.Invalid(dp.Child("diskSizeGB"), d.DiskSizeGB, "must be at least 4"))
		}
		switch {
		case d.Lun < 0 || d.Lun > 63:
			r.Error(field.Invalid(dp.Child("lun"), d.Lun, "must be 0 to 63"))
		case luns[d.Lun]:
			r.Error(field.Duplicate(dp.Child("lun"), d.Lun))
		}
		luns[d.Lun] = true
		switch d.DeletionPolicy {
		case mapiv1.DiskDeletionPolicyTypeDelete:
		case mapiv1.DiskDeletionPolicyTypeDetach:
			r.Error(field.Invalid(dp.Child("deletionPolicy"), d.DeletionPolicy, "CAPZ deletes data disks with the virtual machine"))
		default:
			r.Error(field.NotSupported(dp.Child("deletionPolicy"), d.DeletionPolicy, []string{string(mapiv1.DiskDeletionPolicyTypeDelete)}))
		}
		caching := dataCachingToCAPZ(d, dp.Child("cachingType"), r)
		md := &capzv1.ManagedDiskParameters{StorageAccountType: string(d.ManagedDisk.StorageAccountType),
			DiskEncryptionSet: desToCAPZ(d.ManagedDisk.DiskEncryptionSet, dp.Child("managedDisk", "diskEncryptionSet"), r)}
		if *md == (capzv1.ManagedDiskParameters{}) {
			md = nil
		}
		if len(r.Errors) == n {
			out = append(out, capzv1.DataDisk{NameSuffix: d.NameSuffix, DiskSizeGB: d.DiskSizeGB, ManagedDisk: md, Lun: ptr.To(d.Lun), CachingType: caching})
		}
	}
	return out
}

// dataCachingToCAPZ states the caching: unset is None in Azure, where CAPZ would default it.
func dataCachingToCAPZ(d mapiv1.DataDisk, path *field.Path, r *convert.Report) string {
	c := string(d.CachingType)
	switch c {
	case cachingNone, cachingReadOnly, cachingReadWrite:
	case "":
		r.Warn(path, "unset; read as None, Azure's default for data disks, which CAPZ must state and converting back writes")
		c = cachingNone
	default:
		r.Error(field.NotSupported(path, c, cachingTypes))
	}
	if d.ManagedDisk.StorageAccountType == mapiv1.StorageAccountUltraSSDLRS && c != cachingNone {
		r.Error(field.Invalid(path, c, "UltraSSD_LRS disks take no caching"))
	}
	return c
}

// ultraSSDToCAPZ states the UltraSSD capability; unset, the actuator turns it on when a data
// disk is an UltraSSD.
func ultraSSDToCAPZ(c mapiv1.AzureUltraSSDCapabilityState, disks []mapiv1.DataDisk, path *field.Path, r *convert.Report) *capzv1.AdditionalCapabilities {
	switch c {
	case mapiv1.AzureUltraSSDCapabilityEnabled:
		return &capzv1.AdditionalCapabilities{UltraSSDEnabled: ptr.To(true)}
	case mapiv1.AzureUltraSSDCapabilityDisabled:
		return &capzv1.AdditionalCapabilities{UltraSSDEnabled: ptr.To(false)}
	case "":
		for _, d := range disks {
			if d.ManagedDisk.StorageAccountType == mapiv1.StorageAccountUltraSSDLRS {
				r.Warn(path, "unset; the actuator enables it for the UltraSSD_LRS data disk, which CAPZ states and converting back writes as Enabled")
				return &capzv1.AdditionalCapabilities{UltraSSDEnabled: ptr.To(true)}
			}
		}
		return nil
	default:
		r.Error(field.NotSupported(path, c, []string{string(mapiv1.AzureUltraSSDCapabilityEnabled), string(mapiv1.AzureUltraSSDCapabilityDisabled)}))
		return nil
	}
}

// securityToCAPZ converts the security profile into the security type and UEFI settings the
// actuator gives the virtual machine.
func securityToCAPZ(sp *mapiv1.SecurityProfile, osDisk mapiv1.OSDisk, path *field.Path, r *convert.Report) *capzv1.SecurityProfile {
	enc := osDisk.ManagedDisk.SecurityProfile.SecurityEncryptionType
	if sp == nil {
		if enc != "" {
			r.Error(field.Required(path.Child("securityProfile", "settings", "securityType"), "ConfidentialVM is required with osDisk.managedDisk.securityProfile.securityEncryptionType"))
		}
		return nil
	}
	spp := path.Child("securityProfile")
	sep := spp.Child("settings")
	set := sp.Settings
	out := &capzv1.SecurityProfile{EncryptionAtHost: copyBool(sp.EncryptionAtHost)}
	switch {
	case enc != "":
		confidentialToCAPZ(sp, enc, out, spp, r)
		if set.TrustedLaunch != nil {
			r.Warn(sep.Child("trustedLaunch"), "dropped: ignored on a confidential VM")
		}
	case set.SecurityType == mapiv1.SecurityTypesTrustedLaunch:
		trustedLaunchToCAPZ(set.TrustedLaunch, out, sep, r)
		if set.ConfidentialVM != nil {
			r.Warn(sep.Child("confidentialVM"), "dropped: ignored on a trusted launch VM")
		}
	case set.SecurityType == mapiv1.SecurityTypesConfidentialVM:
		r.Warn(sep, "dropped: without osDisk.managedDisk.securityProfile.securityEncryptionType the actuator makes no confidential VM")
	case set.SecurityType == "":
		if tl := set.TrustedLaunch; tl != nil && (tl.UEFISettings.SecureBoot == mapiv1.SecureBootPolicyEnabled || tl.UEFISettings.VirtualizedTrustedPlatformModule == mapiv1.VirtualizedTrustedPlatformModulePolicyEnabled) {
			r.Error(field.Required(sep.Child("securityType"), "TrustedLaunch is required with enabled trustedLaunch UEFI settings"))
		} else if set.TrustedLaunch != nil || set.ConfidentialVM != nil {
			r.Warn(sep, "dropped: UEFI settings without a securityType are ignored by the actuator")
		}
	default:
		r.Error(field.NotSupported(sep.Child("securityType"), set.SecurityType, []string{string(mapiv1.SecurityTypesTrustedLaunch), string(mapiv1.SecurityTypesConfidentialVM)}))
	}
	if *out == (capzv1.SecurityProfile{}) {
		r.Warn(spp, "empty; dropped")
		return nil
	}
	return out
}

func confidentialToCAPZ(sp *mapiv1.SecurityProfile, enc mapiv1.SecurityEncryptionTypes, out *capzv1.SecurityProfile, spp *field.Path, r *convert.Report) {
	set, path := sp.Settings, spp.Child("settings")
	if set.SecurityType != mapiv1.SecurityTypesConfidentialVM {
		r.Error(field.Invalid(path.Child("securityType"), set.SecurityType, "must be ConfidentialVM with osDisk.managedDisk.securityProfile.securityEncryptionType"))
		return
	}
	if set.ConfidentialVM == nil {
		r.Error(field.Required(path.Child("confidentialVM"), "a confidential VM needs UEFI settings"))
		return
	}
	u, up := set.ConfidentialVM.UEFISettings, path.Child("confidentialVM", "uefiSettings")
	if u.VirtualizedTrustedPlatformModule != mapiv1.VirtualizedTrustedPlatformModulePolicyEnabled {
		r.Error(field.Invalid(up.Child("virtualizedTrustedPlatformModule"), u.VirtualizedTrustedPlatformModule, "must be Enabled on a confidential VM"))
	}
	if enc == mapiv1.SecurityEncryptionTypesDiskWithVMGuestState {
		if ptr.Deref(sp.EncryptionAtHost, false) {
			r.Error(field.Invalid(spp.Child("encryptionAtHost"), true, "cannot be true with DiskWithVMGuestState"))
		}
		if u.SecureBoot != mapiv1.SecureBootPolicyEnabled {
			r.Error(field.Invalid(up.Child("secureBoot"), u.SecureBoot, "must be Enabled with DiskWithVMGuestState"))
		}
	}
	warnUnsetUEFI(u.SecureBoot == "", up.Child("secureBoot"), r)
	out.SecurityType = capzv1.SecurityTypesConfidentialVM
	out.UefiSettings = &capzv1.UefiSettings{SecureBootEnabled: ptr.To(u.SecureBoot == mapiv1.SecureBootPolicyEnabled), VTpmEnabled: ptr.To(true)}
}

func trustedLaunchToCAPZ(tl *mapiv1.TrustedLaunch, out *capzv1.SecurityProfile, path *field.Path, r *convert.Report) {
	if tl == nil {
		r.Error(field.Required(path.Child("trustedLaunch"), "a trusted launch VM needs UEFI settings"))
		return
	}
	u, up := tl.UEFISettings, path.Child("trustedLaunch", "uefiSettings")
	sb := u.SecureBoot == mapiv1.SecureBootPolicyEnabled
	vtpm := u.VirtualizedTrustedPlatformModule == mapiv1.VirtualizedTrustedPlatformModulePolicyEnabled
	if !sb && !vtpm {
		r.Warn(path, "dropped: with neither secureBoot nor virtualizedTrustedPlatformModule Enabled the actuator makes an ordinary VM")
		return
	}
	warnUnsetUEFI(u.SecureBoot == "", up.Child("secureBoot"), r)
	warnUnsetUEFI(u.VirtualizedTrustedPlatformModule == "", up.Child("virtualizedTrustedPlatformModule"), r)
	out.SecurityType = capzv1.SecurityTypesTrustedLaunch
	out.UefiSettings = &capzv1.UefiSettings{SecureBootEnabled: ptr.To(sb), VTpmEnabled: ptr.To(vtpm)}
}

func warnUnsetUEFI(unset bool, path *field.Path, r *convert.Report) {
	if unset {
		r.Warn(path, "unset; read as Disabled, which converting back writes")
	}
}

func copyBool(p *bool) *bool {
	if p == nil {
		return nil
	}
	return ptr.To(*p)
}
