package azure

import (
	mapiv1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	capzv1 "sigs.k8s.io/cluster-api-provider-azure/api/v1beta1"

	"github.com/machina-dev/machina/internal/convert"
)

// osDiskToMAPI converts the OS disk, stating CAPZ's CRD defaults.
func osDiskToMAPI(d capzv1.OSDisk, path *field.Path, r *convert.Report) mapiv1.OSDisk {
	var out mapiv1.OSDisk
	switch d.OSType {
	case osLinux, osWindows:
		out.OSType = d.OSType
	case "":
		r.Warn(path.Child("osType"), "unset; CAPZ's CRD defaults it to Linux, which converting back states")
		out.OSType = osLinux
	default:
		r.Error(field.NotSupported(path.Child("osType"), d.OSType, []string{osLinux, osWindows}))
	}
	switch s := d.DiskSizeGB; {
	case s == nil:
		r.Error(field.Required(path.Child("diskSizeGB"), "the Machine API needs an explicit size"))
	case *s <= 0:
		r.Error(field.Invalid(path.Child("diskSizeGB"), *s, "must be positive"))
	default:
		out.DiskSizeGB = *s
	}
	if m := d.ManagedDisk; m != nil {
		mp := path.Child("managedDisk")
		if *m == (capzv1.ManagedDiskParameters{}) {
			r.Warn(mp, "empty; converting back leaves it unset")
		}
		out.ManagedDisk.StorageAccountType = m.StorageAccountType
		out.ManagedDisk.DiskEncryptionSet = desToMAPI(m.DiskEncryptionSet, mp.Child("diskEncryptionSet"), r)
		if sp := m.SecurityProfile; sp != nil {
			spp := mp.Child("securityProfile")
			out.ManagedDisk.SecurityProfile.SecurityEncryptionType = mapiv1.SecurityEncryptionTypes(sp.SecurityEncryptionType)
			if sp.SecurityEncryptionType == "" {
				r.Unsupported(spp, "<set>", convert.MachineAPI+" (it uses a disk security profile only with a securityEncryptionType)")
			}
			if des := desToMAPI(sp.DiskEncryptionSet, spp.Child("diskEncryptionSet"), r); des != nil {
				out.ManagedDisk.SecurityProfile.DiskEncryptionSet = *des
			}
		}
	}
	if dd := d.DiffDiskSettings; dd != nil {
		dp := path.Child("diffDiskSettings")
		if dd.Option != ephemeralLocal {
			r.Error(field.NotSupported(dp.Child("option"), dd.Option, []string{ephemeralLocal}))
		}
		if dd.Placement != nil {
			r.Unsupported(dp.Child("placement"), *dd.Placement, convert.MachineAPI)
		}
		out.DiskSettings.EphemeralStorageLocation = ephemeralLocal
	}
	out.CachingType = cachingToMAPI(d.CachingType, cachingNone, "CAPZ's CRD defaults it to None", path.Child("cachingType"), r)
	return out
}

// cachingToMAPI returns a caching type, stating def (CAPZ's default, said by why) for "".
func cachingToMAPI(c, def, why string, path *field.Path, r *convert.Report) string {
	switch c {
	case cachingNone, cachingReadOnly, cachingReadWrite:
		return c
	case "":
		r.Warn(path, "unset; %s, which converting back states", why)
		return def
	default:
		r.Error(field.NotSupported(path, c, cachingTypes))
		return ""
	}
}

func desToMAPI(d *capzv1.DiskEncryptionSetParameters, path *field.Path, r *convert.Report) *mapiv1.DiskEncryptionSetParameters {
	if d == nil {
		return nil
	}
	if d.ID == "" {
		r.Error(field.Required(path.Child("id"), ""))
		return nil
	}
	return &mapiv1.DiskEncryptionSetParameters{ID: d.ID}
}

// dataDisksToMAPI converts the data disks; CAPZ deletes them with the virtual machine.
func dataDisksToMAPI(disks []capzv1.DataDisk, path *field.Path, r *convert.Report) []mapiv1.DataDisk {
	var out []mapiv1.DataDisk
	for i, d := range disks {
		dp := path.Index(i)
		o := mapiv1.DataDisk{NameSuffix: d.NameSuffix, DiskSizeGB: d.DiskSizeGB, DeletionPolicy: mapiv1.DiskDeletionPolicyTypeDelete}
		if d.Lun == nil {
			r.Error(field.Required(dp.Child("lun"), "the Machine API needs an explicit lun"))
		} else {
			o.Lun = *d.Lun
		}
		ultra := false
		if m := d.ManagedDisk; m != nil {
			o.ManagedDisk.StorageAccountType = mapiv1.StorageAccountType(m.StorageAccountType)
			o.ManagedDisk.DiskEncryptionSet = desToMAPI(m.DiskEncryptionSet, dp.Child("managedDisk", "diskEncryptionSet"), r)
			if m.SecurityProfile != nil {
				r.Unsupported(dp.Child("managedDisk", "securityProfile"), "<set>", convert.MachineAPI)
			}
			if *m == (capzv1.ManagedDiskParameters{}) {
				r.Warn(dp.Child("managedDisk"), "empty; converting back leaves it unset")
			}
			ultra = m.StorageAccountType == string(mapiv1.StorageAccountUltraSSDLRS)
		}
		def := cachingReadWrite
		if ultra {
			def = cachingNone
		}
		o.CachingType = mapiv1.CachingTypeOption(cachingToMAPI(d.CachingType, def, "CAPZ's webhook defaults it to "+def, dp.Child("cachingType"), r))
		out = append(out, o)
	}
	return out
}

// securityToMAPI converts the security type and UEFI settings into the Machine API's
// settings; enc is the OS disk's security encryption type.
func securityToMAPI(sp *capzv1.SecurityProfile, osDisk mapiv1.OSDisk, path *field.Path, r *convert.Report) *mapiv1.SecurityProfile {
	enc := osDisk.ManagedDisk.SecurityProfile.SecurityEncryptionType
	if sp == nil {
		if enc != "" {
			r.Error(field.Required(path.Child("securityType"), "ConfidentialVM is required with osDisk.managedDisk.securityProfile.securityEncryptionType"))
		}
		return nil
	}
	out := &mapiv1.SecurityProfile{EncryptionAtHost: copyBool(sp.EncryptionAtHost)}
	up := path.Child("uefiSettings")
	var sb, vtpm mapiv1.VirtualizedTrustedPlatformModulePolicy
	switch u := sp.UefiSettings; {
	case u != nil:
		sb, vtpm = uefiToMAPI(u.SecureBootEnabled, up.Child("secureBootEnabled"), r), uefiToMAPI(u.VTpmEnabled, up.Child("vTpmEnabled"), r)
	case sp.SecurityType != "":
		r.Error(field.Required(up, "the Machine API states secure boot and vTPM for a "+string(sp.SecurityType)+" VM"))
	}
	if enc != "" && sp.SecurityType != capzv1.SecurityTypesConfidentialVM {
		r.Error(field.Invalid(path.Child("securityType"), sp.SecurityType, "must be ConfidentialVM with osDisk.managedDisk.securityProfile.securityEncryptionType"))
	}
	switch sp.SecurityType {
	case "":
		if sp.UefiSettings != nil {
			r.Unsupported(up, "<set>", convert.MachineAPI+" (it applies UEFI settings only with a securityType)")
		}
	case capzv1.SecurityTypesConfidentialVM:
		switch {
		case enc == "":
			r.Error(field.Required(path.Child("securityType"), "a confidential VM needs osDisk.managedDisk.securityProfile.securityEncryptionType in the Machine API"))
		case vtpm != mapiv1.VirtualizedTrustedPlatformModulePolicyEnabled:
			r.Error(field.Invalid(up.Child("vTpmEnabled"), false, "the Machine API enables vTPM on every confidential VM"))
		}
		out.Settings = mapiv1.SecuritySettings{SecurityType: mapiv1.SecurityTypesConfidentialVM, ConfidentialVM: &mapiv1.ConfidentialVM{
			UEFISettings: mapiv1.UEFISettings{SecureBoot: mapiv1.SecureBootPolicy(sb), VirtualizedTrustedPlatformModule: vtpm}}}
	case capzv1.SecurityTypesTrustedLaunch:
		if sb != mapiv1.VirtualizedTrustedPlatformModulePolicyEnabled && vtpm != mapiv1.VirtualizedTrustedPlatformModulePolicyEnabled {
			r.Error(field.Invalid(up, "<secure boot and vTPM off>", "the Machine API makes a trusted launch VM only with secure boot or vTPM enabled"))
		}
		out.Settings = mapiv1.SecuritySettings{SecurityType: mapiv1.SecurityTypesTrustedLaunch, TrustedLaunch: &mapiv1.TrustedLaunch{
			UEFISettings: mapiv1.UEFISettings{SecureBoot: mapiv1.SecureBootPolicy(sb), VirtualizedTrustedPlatformModule: vtpm}}}
	default:
		r.Error(field.NotSupported(path.Child("securityType"), sp.SecurityType, []string{string(capzv1.SecurityTypesConfidentialVM), string(capzv1.SecurityTypesTrustedLaunch)}))
	}
	if out.EncryptionAtHost == nil && out.Settings == (mapiv1.SecuritySettings{}) {
		r.Warn(path, "empty; converting back leaves it unset")
		return nil
	}
	return out
}

// uefiToMAPI reads a UEFI switch as the Machine API's policy word (Enabled or Disabled).
func uefiToMAPI(v *bool, path *field.Path, r *convert.Report) mapiv1.VirtualizedTrustedPlatformModulePolicy {
	switch {
	case v == nil:
		r.Warn(path, "unset; read as off, which converting back states")
		return mapiv1.VirtualizedTrustedPlatformModulePolicyDisabled
	case *v:
		return mapiv1.VirtualizedTrustedPlatformModulePolicyEnabled
	default:
		return mapiv1.VirtualizedTrustedPlatformModulePolicyDisabled
	}
}
