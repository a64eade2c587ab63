package openstack

import (
	"slices"

	mapov1 "github.com/openshift/api/machine/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	capov1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"

	"github.com/machina-dev/machina/internal/convert"
)

// FromInfra converts an OpenStackMachine spec and the Machine's values back into an
// OpenstackProviderSpec.
func (p Platform) FromInfra(spec convert.InfraSpec, mv convert.MachineValues, paths convert.InfraPaths, r *convert.Report) *runtime.RawExtension {
	s, ok := convert.InfraSpecAs[capov1.OpenStackMachineSpec](spec, paths.Infra, r)
	if !ok {
		return nil
	}
	path := paths.Infra
	ps := &mapov1.OpenstackProviderSpec{}
	ps.APIVersion = mapov1.GroupVersion.String()
	ps.Kind = ProviderSpecKind

	// Server.
	ps.Flavor = ptr.Deref(s.Flavor, "")
	if s.FlavorID != nil {
		r.Unsupported(path.Child("flavorID"), *s.FlavorID, convert.MachineAPI+" (it takes flavors by name)")
	} else if ps.Flavor == "" {
		r.Error(field.Required(path.Child("flavor"), "the Machine API needs a flavor"))
	}
	ps.Image = imageToMAPI(s.Image, path.Child("image"), r)
	ps.KeyName = s.SSHKeyName
	ps.Tags = tagSetToMAPI(s.Tags, path.Child("tags"), r)
	ps.ServerMetadata = metadataToMAPI(s.ServerMetadata, path.Child("serverMetadata"), r)
	ps.ConfigDrive = copyBool(s.ConfigDrive)
	ps.Trunk = s.Trunk
	ps.ServerGroupID, ps.ServerGroupName = serverGroupToMAPI(s.ServerGroup, path.Child("serverGroup"), r)
	ps.AvailabilityZone = mv.FailureDomain
	if len(s.SchedulerHintAdditionalProperties) > 0 {
		r.Unsupported(path.Child("schedulerHintAdditionalProperties"), len(s.SchedulerHintAdditionalProperties), convert.MachineAPI)
	}

	// Secrets.
	if mv.DataSecretName != nil && *mv.DataSecretName != "" {
		ps.UserDataSecret = &corev1.SecretReference{Name: *mv.DataSecretName}
	}
	if id := s.IdentityRef; id != nil {
		ps.CloudsSecret = &corev1.SecretReference{Name: id.Name, Namespace: p.secretNamespace()}
		ps.CloudName = id.CloudName
		if id.Name == "" {
			r.Error(field.Required(path.Child("identityRef", "name"), ""))
		}
		if id.CloudName == "" {
			r.Error(field.Required(path.Child("identityRef", "cloudName"), "the Machine API needs the name of the cloud in the clouds secret"))
		}
		if id.Region != "" {
			r.Unsupported(path.Child("identityRef", "region"), id.Region, convert.MachineAPI+" (the clouds secret names the region)")
		}
	}

	// Storage.
	ps.RootVolume = rootVolumeToMAPI(s.RootVolume, mv.FailureDomain, path.Child("rootVolume"), r)
	ps.AdditionalBlockDevices = blockDevicesToMAPI(s.AdditionalBlockDevices, mv.FailureDomain, path.Child("additionalBlockDevices"), r)

	// Network.
	for i, sg := range s.SecurityGroups {
		ps.SecurityGroups = append(ps.SecurityGroups, securityGroupToMAPI(sg, path.Child("securityGroups").Index(i), r))
	}
	ps.Networks, ps.Ports = p.portsToMAPI(s.Ports, path.Child("ports"), r)
	if s.FloatingIPPoolRef != nil {
		r.Unsupported(path.Child("floatingIPPoolRef"), s.FloatingIPPoolRef.Name, convert.MachineAPI)
	}
	return convert.Encode(ps, path, r)
}

// imageToMAPI names the image; the Machine API takes images by name only.
func imageToMAPI(img capov1.ImageParam, path *field.Path, r *convert.Report) string {
	switch {
	case img.ID != nil:
		r.Unsupported(path.Child("id"), *img.ID, convert.MachineAPI+" (it takes images by name)")
	case img.ImageRef != nil:
		r.Unsupported(path.Child("imageRef"), img.ImageRef.Name, convert.MachineAPI+" (it takes images by name)")
	case img.Filter == nil || ptr.Deref(img.Filter.Name, "") == "":
		r.Error(field.Required(path.Child("filter", "name"), "the Machine API takes images by name"))
	default:
		if len(img.Filter.Tags) > 0 {
			r.Unsupported(path.Child("filter", "tags"), img.Filter.Tags, convert.MachineAPI+" (it takes images by name)")
		}
		return *img.Filter.Name
	}
	return ""
}

// tagSetToMAPI copies a CAPO tag set: tags cannot be empty nor repeat (CAPO's CRD keeps them
// as a set, and the Machine API would drop a repeat going forward).
func tagSetToMAPI(tags []string, path *field.Path, r *convert.Report) []string {
	var out []string
	for i, t := range tags {
		switch {
		case t == "":
			r.Error(field.Required(path.Index(i), "tags cannot be empty"))
		case slices.Contains(out, t):
			r.Error(field.Duplicate(path.Index(i), t))
		default:
			out = append(out, t)
		}
	}
	return out
}

func metadataToMAPI(md []capov1.ServerMetadata, path *field.Path, r *convert.Report) map[string]string {
	if len(md) == 0 {
		return nil
	}
	out := make(map[string]string, len(md))
	for i, m := range md {
		if _, dup := out[m.Key]; dup {
			r.Error(field.Duplicate(path.Index(i).Child("key"), m.Key))
			continue
		}
		out[m.Key] = m.Value
	}
	return out
}

// serverGroupToMAPI returns the server group's id or name.
func serverGroupToMAPI(sg *capov1.ServerGroupParam, path *field.Path, r *convert.Report) (string, string) {
	switch {
	case sg == nil:
		return "", ""
	case sg.ID != nil && sg.Filter != nil:
		r.Error(field.Forbidden(path, "set an id or a filter, not both"))
	case sg.ID != nil:
		checkUUID(*sg.ID, path.Child("id"), r)
		return *sg.ID, ""
	case sg.Filter != nil && ptr.Deref(sg.Filter.Name, "") != "":
		return "", *sg.Filter.Name
	default:
		r.Error(field.Required(path, "an id or a filter name"))
	}
	return "", ""
}

func rootVolumeToMAPI(rv *capov1.RootVolume, failureDomain string, path *field.Path, r *convert.Report) *mapov1.RootVolume {
	if rv == nil {
		return nil
	}
	if rv.SizeGiB < 1 {
		r.Error(field.Invalid(path.Child("sizeGiB"), rv.SizeGiB, "must be at least 1"))
	}
	return &mapov1.RootVolume{Size: rv.SizeGiB, VolumeType: rv.Type, Zone: volumeZoneToMAPI(rv.AvailabilityZone, failureDomain, path.Child("availabilityZone"), r)}
}

// volumeZoneToMAPI returns the Machine API's volume zone: empty for the server's zone.
func volumeZoneToMAPI(az *capov1.VolumeAvailabilityZone, failureDomain string, path *field.Path, r *convert.Report) string {
	switch {
	case az == nil && failureDomain != "":
		r.Error(field.Invalid(path, "<unset>", "the volume gets no explicit zone, but the Machine API creates it in the server's zone ("+
			failureDomain+"); set from: Machine, or a name"))
	case az == nil:
		r.Warn(path, "unset; the Machine API creates volumes in the server's zone (none here), which converting back writes as from: Machine")
	case az.From == capov1.VolumeAZFromMachine:
		if az.Name != nil {
			r.Error(field.Forbidden(path.Child("name"), "only allowed when from is Name"))
		}
	case az.From == "" || az.From == capov1.VolumeAZFromName:
		if ptr.Deref(az.Name, "") == "" {
			r.Error(field.Required(path.Child("name"), "required when from is Name"))
			return ""
		}
		return string(*az.Name)
	default:
		r.Error(field.NotSupported(path.Child("from"), az.From, []string{string(capov1.VolumeAZFromName), string(capov1.VolumeAZFromMachine)}))
	}
	return ""
}

func blockDevicesToMAPI(devs []capov1.AdditionalBlockDevice, failureDomain string, path *field.Path, r *convert.Report) []mapov1.AdditionalBlockDevice {
	var out []mapov1.AdditionalBlockDevice
	for i, d := range devs {
		dp := path.Index(i)
		if d.Name == "" {
			r.Error(field.Required(dp.Child("name"), ""))
		}
		if d.SizeGiB < 1 {
			r.Error(field.Invalid(dp.Child("sizeGiB"), d.SizeGiB, "must be at least 1"))
		}
		bd := mapov1.AdditionalBlockDevice{Name: d.Name, SizeGiB: d.SizeGiB}
		sp := dp.Child("storage")
		switch d.Storage.Type {
		case capov1.LocalBlockDevice:
			bd.Storage.Type = mapov1.LocalBlockDevice
			if d.Storage.Volume != nil {
				r.Error(field.Forbidden(sp.Child("volume"), "only allowed when type is Volume"))
			}
		case capov1.VolumeBlockDevice:
			bd.Storage.Type = mapov1.VolumeBlockDevice
			v := ptr.Deref(d.Storage.Volume, capov1.BlockDeviceVolume{})
			bd.Storage.Volume = &mapov1.BlockDeviceVolume{Type: v.Type,
				AvailabilityZone: volumeZoneToMAPI(v.AvailabilityZone, failureDomain, sp.Child("volume", "availabilityZone"), r)}
		default:
			r.Error(field.NotSupported(sp.Child("type"), d.Storage.Type, []string{string(capov1.VolumeBlockDevice), string(capov1.LocalBlockDevice)}))
		}
		out = append(out, bd)
	}
	return out
}

// securityGroupToMAPI converts a security group: an id becomes uuid, a filter's name the
// name, the rest of the filter the filter.
func securityGroupToMAPI(sg capov1.SecurityGroupParam, path *field.Path, r *convert.Report) mapov1.SecurityGroupParam {
	switch {
	case sg.ID != nil && sg.Filter != nil:
		r.Error(field.Forbidden(path, "set an id or a filter, not both"))
	case sg.ID != nil:
		checkUUID(*sg.ID, path.Child("id"), r)
		return mapov1.SecurityGroupParam{UUID: *sg.ID}
	case !sg.Filter.IsZero():
		f := sg.Filter
		t := joinNeutronTags(f.FilterByNeutronTags, path.Child("filter"), r)
		return mapov1.SecurityGroupParam{Name: f.Name, Filter: mapov1.SecurityGroupFilter{Description: f.Description, ProjectID: f.ProjectID,
			Tags: t.tags, TagsAny: t.tagsAny, NotTags: t.notTags, NotTagsAny: t.notTagsAny}}
	default:
		r.Error(field.Required(path, "an id or a filter"))
	}
	return mapov1.SecurityGroupParam{}
}
