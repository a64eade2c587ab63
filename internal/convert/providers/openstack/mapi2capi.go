package openstack

import (
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"

	mapov1 "github.com/openshift/api/machine/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	capov1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"

	"github.com/machina-dev/machina/internal/convert"
)

// ToInfra converts an OpenstackProviderSpec into an OpenStackMachine spec.
func (p Platform) ToInfra(value *runtime.RawExtension, path *field.Path, r *convert.Report) (convert.InfraSpec, convert.MachineValues) {
	var ps mapov1.OpenstackProviderSpec
	if !convert.DecodeProviderSpec(value, &ps, path, r) {
		return nil, convert.MachineValues{}
	}
	var mv convert.MachineValues
	convert.CheckTypeMeta(ps.APIVersion, ps.Kind, convert.SpecType{APIVersion: mapov1.GroupVersion.String(), Legacy: "openstackproviderconfig.openshift.io/v1alpha1", Kind: ProviderSpecKind}, path, r)
	if !reflect.ValueOf(ps.ObjectMeta).IsZero() {
		r.Warn(path.Child("metadata"), "ignored by the Machine API and dropped")
	}
	out := &capov1.OpenStackMachineSpec{}

	// Server.
	if ps.Flavor == "" {
		r.Error(field.Required(path.Child("flavor"), "CAPO needs a flavor"))
	} else {
		out.Flavor = ptr.To(ps.Flavor)
	}
	out.Image = imageToCAPO(&ps, path, r)
	out.SSHKeyName = ps.KeyName
	if ps.SshUserName != "" {
		r.Warn(path.Child("sshUserName"), "dropped: deprecated and ignored by the Machine API")
	}
	out.Tags = serverTagsToCAPO(ps.Tags, path.Child("tags"), r)
	out.ServerMetadata = metadataToCAPO(ps.ServerMetadata)
	out.ConfigDrive = copyBool(ps.ConfigDrive)
	out.Trunk = ps.Trunk
	out.ServerGroup = serverGroupToCAPO(ps.ServerGroupID, ps.ServerGroupName, path, r)
	mv.FailureDomain = ps.AvailabilityZone

	// Secrets.
	switch us := ps.UserDataSecret; {
	case us == nil || us.Name == "":
		r.Error(field.Required(path.Child("userDataSecret", "name"), "Cluster API Machines need bootstrap data (spec.bootstrap.dataSecretName)"))
	default:
		mv.DataSecretName = ptr.To(us.Name)
		p.checkSecretNamespace(us.Namespace, path.Child("userDataSecret", "namespace"), false, r)
	}
	out.IdentityRef = p.identityToCAPO(&ps, path, r)

	// Storage.
	out.RootVolume = rootVolumeToCAPO(ps.RootVolume, path.Child("rootVolume"), r)
	out.AdditionalBlockDevices = blockDevicesToCAPO(ps.AdditionalBlockDevices, path.Child("additionalBlockDevices"), r)

	// Network.
	for i, sg := range ps.SecurityGroups {
		if v, ok := securityGroupToCAPO(sg, path.Child("securityGroups").Index(i), r); ok {
			out.SecurityGroups = append(out.SecurityGroups, v)
		}
	}
	out.Ports = p.portsToCAPO(ps.Networks, ps.Ports, path, r)
	if ps.FloatingIP != "" { //nolint:staticcheck // read only to convert or report a deprecated field
		r.Unsupported(path.Child("floatingIP"), ps.FloatingIP, "CAPO (it takes floating IPs from an address pool, floatingIPPoolRef)") //nolint:staticcheck // read only to convert or report a deprecated field
	}
	if ps.PrimarySubnet != "" {
		r.Warn(path.Child("primarySubnet"), "dropped: deprecated and ignored by the Machine API")
	}
	return out, mv
}

// checkSecretNamespace accepts a secret namespace that is the Machine API namespace, which
// CAPO's counterpart of the secret lives beside; identity says whether converting back
// writes the namespace (it does for the clouds secret, not for the user data secret).
func (p Platform) checkSecretNamespace(ns string, path *field.Path, identity bool, r *convert.Report) {
	switch {
	case ns == "" && identity:
		r.Warn(path, "unset; read as %s, which converting back writes", p.secretNamespace())
	case ns == "":
	case ns != p.secretNamespace():
		r.Error(field.Invalid(path, ns, "CAPO reads secrets from the OpenStackMachine's own namespace, the counterpart of "+p.secretNamespace()+"; a secret elsewhere cannot be converted"))
	case !identity:
		r.Warn(path, "dropped: the bootstrap data secret is always in the Machine's namespace")
	}
}

// identityToCAPO converts the clouds secret and cloud name into the OpenStackMachine's
// identityRef. Without a clouds secret CAPO uses the OpenStackCluster's identity.
func (p Platform) identityToCAPO(ps *mapov1.OpenstackProviderSpec, path *field.Path, r *convert.Report) *capov1.OpenStackIdentityReference {
	cs := ps.CloudsSecret
	if cs == nil || cs.Name == "" {
		if ps.CloudName != "" {
			r.Warn(path.Child("cloudName"), "dropped: without a cloudsSecret the OpenStackCluster's identity applies")
		}
		return nil
	}
	p.checkSecretNamespace(cs.Namespace, path.Child("cloudsSecret", "namespace"), true, r)
	if ps.CloudName == "" {
		r.Error(field.Required(path.Child("cloudName"), "CAPO needs the name of the cloud in the clouds secret"))
		return nil
	}
	return &capov1.OpenStackIdentityReference{Name: cs.Name, CloudName: ps.CloudName}
}

// imageToCAPO names the image. The Machine API takes images by name; older installers put
// the name in rootVolume.sourceUUID instead, which the actuator reads when image is empty.
func imageToCAPO(ps *mapov1.OpenstackProviderSpec, path *field.Path, r *convert.Report) capov1.ImageParam {
	name := ps.Image
	if rv := ps.RootVolume; rv != nil && rv.SourceUUID != "" {
		sp := path.Child("rootVolume", "sourceUUID")
		switch name {
		case "":
			name = rv.SourceUUID
			r.Warn(sp, "deprecated; read as the image name, which converting back writes in image")
		case rv.SourceUUID:
			r.Warn(sp, "dropped: deprecated, and it repeats image")
		default:
			r.Warn(sp, "dropped: deprecated, and the Machine API ignores it because image is set")
		}
	}
	if name == "" {
		r.Error(field.Required(path.Child("image"), "CAPO needs an image"))
		return capov1.ImageParam{}
	}
	return capov1.ImageParam{Filter: &capov1.ImageFilter{Name: ptr.To(name)}}
}

// serverTagsToCAPO copies the server tags; CAPO keeps them as a set.
func serverTagsToCAPO(tags []string, path *field.Path, r *convert.Report) []string {
	var out []string
	for i, t := range tags {
		switch {
		case t == "":
			r.Error(field.Required(path.Index(i), "tags cannot be empty"))
		case slices.Contains(out, t):
			r.Warn(path.Index(i), "dropped: repeats tag %q; CAPO keeps tags as a set", t)
		default:
			out = append(out, t)
		}
	}
	return out
}

// metadataToCAPO turns the server metadata map into CAPO's list, sorted by key.
func metadataToCAPO(m map[string]string) []capov1.ServerMetadata {
	if len(m) == 0 {
		return nil
	}
	out := make([]capov1.ServerMetadata, 0, len(m))
	for k, v := range m {
		out = append(out, capov1.ServerMetadata{Key: k, Value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// serverGroupToCAPO takes the server group by id or, failing that, by name.
func serverGroupToCAPO(id, name string, path *field.Path, r *convert.Report) *capov1.ServerGroupParam {
	switch {
	case id != "":
		checkUUID(id, path.Child("serverGroupID"), r)
		if name != "" {
			r.Warn(path.Child("serverGroupName"), "dropped: CAPO takes the server group by id or by name, and serverGroupID names it")
		}
		return &capov1.ServerGroupParam{ID: ptr.To(id)}
	case name != "":
		return &capov1.ServerGroupParam{Filter: &capov1.ServerGroupFilter{Name: ptr.To(name)}}
	}
	return nil
}

// rootVolumeToCAPO converts the root volume. The Machine API creates it in the server's zone
// unless it names one: CAPO's "from: Machine".
func rootVolumeToCAPO(rv *mapov1.RootVolume, path *field.Path, r *convert.Report) *capov1.RootVolume {
	if rv == nil {
		return nil
	}
	if rv.DeprecatedSourceType != "" { //nolint:staticcheck // read only to convert or report a deprecated field
		r.Warn(path.Child("sourceType"), "dropped: deprecated and ignored by the Machine API")
	}
	if rv.DeprecatedDeviceType != "" { //nolint:staticcheck // read only to convert or report a deprecated field
		r.Warn(path.Child("deviceType"), "dropped: deprecated and ignored by the Machine API")
	}
	if rv.Size <= 0 {
		r.Error(field.Invalid(path.Child("diskSize"), rv.Size, "CAPO root volumes need a size of at least 1 GiB"))
	}
	return &capov1.RootVolume{SizeGiB: rv.Size, BlockDeviceVolume: capov1.BlockDeviceVolume{
		Type:             rv.VolumeType,
		AvailabilityZone: volumeZoneToCAPO(rv.Zone, path.Child("availabilityZone"), r),
	}}
}

func volumeZoneToCAPO(zone string, path *field.Path, r *convert.Report) *capov1.VolumeAvailabilityZone {
	if zone == "" {
		return &capov1.VolumeAvailabilityZone{From: capov1.VolumeAZFromMachine}
	}
	if strings.ContainsAny(zone, " \t\n") {
		r.Error(field.Invalid(path, zone, "a volume availability zone cannot contain spaces"))
	}
	return &capov1.VolumeAvailabilityZone{From: capov1.VolumeAZFromName, Name: ptr.To(capov1.VolumeAZName(zone))}
}

// blockDevicesToCAPO converts the additional block devices, which both APIs describe alike.
func blockDevicesToCAPO(devs []mapov1.AdditionalBlockDevice, path *field.Path, r *convert.Report) []capov1.AdditionalBlockDevice {
	var out []capov1.AdditionalBlockDevice
	seen := map[string]bool{}
	for i, d := range devs {
		dp := path.Index(i)
		ok := true
		switch {
		case d.Name == "":
			r.Error(field.Required(dp.Child("name"), ""))
			ok = false
		case d.Name == "root":
			r.Error(field.Invalid(dp.Child("name"), d.Name, "reserved for the root volume"))
			ok = false
		case seen[d.Name]:
			r.Error(field.Duplicate(dp.Child("name"), d.Name))
			ok = false
		}
		seen[d.Name] = true
		if d.SizeGiB < 1 {
			r.Error(field.Invalid(dp.Child("sizeGiB"), d.SizeGiB, "must be at least 1"))
			ok = false
		}
		st, stOK := storageToCAPO(d.Storage, dp.Child("storage"), r)
		if ok && stOK {
			out = append(out, capov1.AdditionalBlockDevice{Name: d.Name, SizeGiB: d.SizeGiB, Storage: st})
		}
	}
	return out
}

func storageToCAPO(s mapov1.BlockDeviceStorage, path *field.Path, r *convert.Report) (capov1.BlockDeviceStorage, bool) {
	switch s.Type {
	case mapov1.LocalBlockDevice:
		if s.Volume != nil {
			r.Error(field.Forbidden(path.Child("volume"), "only allowed when type is Volume"))
			return capov1.BlockDeviceStorage{}, false
		}
		return capov1.BlockDeviceStorage{Type: capov1.LocalBlockDevice}, true
	case mapov1.VolumeBlockDevice:
		v := s.Volume
		if v == nil {
			r.Warn(path.Child("volume"), "unset; read as the cloud's default volume type in the server's zone, which converting back writes as volume: {}")
			v = &mapov1.BlockDeviceVolume{}
		}
		return capov1.BlockDeviceStorage{Type: capov1.VolumeBlockDevice, Volume: &capov1.BlockDeviceVolume{
			Type:             v.Type,
			AvailabilityZone: volumeZoneToCAPO(v.AvailabilityZone, path.Child("volume", "availabilityZone"), r),
		}}, true
	default:
		r.Error(field.NotSupported(path.Child("type"), s.Type, []string{string(mapov1.VolumeBlockDevice), string(mapov1.LocalBlockDevice)}))
		return capov1.BlockDeviceStorage{}, false
	}
}

// uuidPattern is the format CAPO's CRDs require of resource IDs.
var uuidPattern = regexp.MustCompile(`(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$`)

// checkUUID reports an ID that is not a UUID: CAPO's CRDs refuse it.
func checkUUID(id string, path *field.Path, r *convert.Report) bool {
	if uuidPattern.MatchString(id) {
		return true
	}
	r.Error(field.Invalid(path, id, "CAPO takes OpenStack resource IDs as UUIDs"))
	return false
}

func copyBool(p *bool) *bool {
	if p == nil {
		return nil
	}
	return ptr.To(*p)
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return ptr.To(s)
}
