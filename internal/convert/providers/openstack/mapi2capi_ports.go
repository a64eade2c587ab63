package openstack

import (
	"slices"
	"sort"
	"strings"

	mapov1 "github.com/openshift/api/machine/v1alpha1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	capov1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"

	"github.com/machina-dev/machina/internal/convert"
)

// portsToCAPO turns the providerSpec's networks and ports into CAPO ports, networks first as
// the Machine API attaches them. A network given only by subnets becomes one port per
// subnet; any other network one port with a fixed IP per subnet.
func (p Platform) portsToCAPO(networks []mapov1.NetworkParam, ports []mapov1.PortOpts, path *field.Path, r *convert.Report) []capov1.PortOpts {
	var out []capov1.PortOpts
	for i, n := range networks {
		out = append(out, p.networkToCAPO(n, path.Child("networks").Index(i), r)...)
	}
	asNetworks := true // converting back reads ports as networks until one cannot be
	for i, pt := range ports {
		pp := path.Child("ports").Index(i)
		cp, ok := portToCAPO(pt, pp, r)
		if !ok {
			asNetworks = false
			continue
		}
		if asNetworks && p.readsAsNetwork(cp) {
			r.Warn(pp, "has nothing a networks entry lacks; converting back lists it under networks (the same port)")
		} else {
			asNetworks = false
		}
		out = append(out, cp)
	}
	return out
}

// networkToCAPO converts one providerSpec network into its ports.
func (p Platform) networkToCAPO(n mapov1.NetworkParam, path *field.Path, r *convert.Report) []capov1.PortOpts {
	if n.FixedIp != "" {
		r.Warn(path.Child("fixedIp"), "dropped: deprecated and ignored by the Machine API")
	}
	network := networkParamToCAPO(n, path, r)
	tags := append([]string(nil), n.PortTags...)
	var subnets []capov1.SubnetParam
	for j, s := range n.Subnets {
		sp := path.Child("subnets").Index(j)
		if len(s.PortTags) > 0 {
			r.Warn(sp.Child("portTags"), "the port gets them with the network's portTags; converting back lists them there")
			tags = append(tags, s.PortTags...)
		}
		if v, ok := subnetToCAPO(s, sp, r); ok {
			subnets = append(subnets, v)
		}
	}
	base := capov1.PortOpts{Tags: portTagsToCAPO(tags, path.Child("portTags"), r)}
	base.VNICType = nonEmpty(n.VNICType)
	base.Profile = profileToCAPO(n.Profile, path.Child("profile"), r)
	base.DisablePortSecurity = invert(n.PortSecurity)
	base.AllowedAddressPairs = p.vipPairs(n.NoAllowedAddressPairs, path, r)
	if network != nil {
		port := *base.DeepCopy()
		port.Network = network
		for i := range subnets {
			port.FixedIPs = append(port.FixedIPs, capov1.FixedIP{Subnet: &subnets[i]})
		}
		return []capov1.PortOpts{port}
	}
	switch {
	case len(n.Subnets) == 0:
		r.Error(field.Required(path, "a network needs a uuid, a filter or subnets"))
	case len(n.Subnets) > 1:
		r.Warn(path.Child("subnets"), "the Machine API makes one port per subnet of a network given only by subnets; converting back lists each as a network of its own")
	}
	out := make([]capov1.PortOpts, 0, len(subnets))
	for i := range subnets {
		port := *base.DeepCopy()
		port.FixedIPs = []capov1.FixedIP{{Subnet: subnets[i].DeepCopy()}}
		out = append(out, port)
	}
	return out
}

// vipPairs are the allowed address pairs the Machine API gives a network's ports: the
// cluster's virtual IPs, unless noAllowedAddressPairs.
func (p Platform) vipPairs(none bool, path *field.Path, r *convert.Report) []capov1.AddressPair {
	if none {
		if p.VIPs != nil && len(p.VIPs) == 0 {
			r.Warn(path.Child("noAllowedAddressPairs"), "changes nothing: the cluster has no API or ingress virtual IPs to allow; converting back leaves it unset")
		}
		return nil
	}
	if p.VIPs == nil {
		r.Warn(path.Child("noAllowedAddressPairs"), "false, but the cluster's API and ingress virtual IPs, which the Machine API allows on the port, are not known here: the port gets none and converting back sets noAllowedAddressPairs; give the Infrastructure (--infrastructure)")
		return nil
	}
	var out []capov1.AddressPair
	for _, ip := range p.VIPs {
		out = append(out, capov1.AddressPair{IPAddress: ip})
	}
	return out
}

// networkParamToCAPO returns the network a providerSpec network names, nil when it names
// none (only subnets). CAPO takes an id or a filter.
func networkParamToCAPO(n mapov1.NetworkParam, path *field.Path, r *convert.Report) *capov1.NetworkParam {
	fp := path.Child("filter")
	f := n.Filter
	warnDeprecated(fp, r, map[string]bool{"status": f.DeprecatedStatus != "", "adminStateUp": f.DeprecatedAdminStateUp != nil, //nolint:staticcheck // read only to convert or report a deprecated field
		"shared": f.DeprecatedShared != nil, "marker": f.DeprecatedMarker != "", "limit": f.DeprecatedLimit != 0, //nolint:staticcheck // read only to convert or report a deprecated field
		"sortKey": f.DeprecatedSortKey != "", "sortDir": f.DeprecatedSortDir != ""}) //nolint:staticcheck // read only to convert or report a deprecated field
	id := aliasID(n.UUID, f.ID, path.Child("uuid"), fp.Child("id"), r) //nolint:staticcheck // read only to convert or report a deprecated field
	filter := &capov1.NetworkFilter{Name: f.Name, Description: f.Description, ProjectID: projectID(f.ProjectID, f.TenantID, fp, r),
		FilterByNeutronTags: neutronTags(f.Tags, f.TagsAny, f.NotTags, f.NotTagsAny, fp, r)}
	switch {
	case id != "":
		checkUUID(id, path.Child("uuid"), r)
		if !filter.IsZero() {
			r.Warn(fp, "dropped: CAPO takes a network by id or by filter, and the id names it")
		}
		return &capov1.NetworkParam{ID: ptr.To(id)}
	case !filter.IsZero():
		return &capov1.NetworkParam{Filter: filter}
	}
	return nil
}

// subnetToCAPO converts a subnet of a providerSpec network.
func subnetToCAPO(s mapov1.SubnetParam, path *field.Path, r *convert.Report) (capov1.SubnetParam, bool) {
	fp := path.Child("filter")
	f := s.Filter
	if s.PortSecurity != nil {
		r.Warn(path.Child("portSecurity"), "dropped: deprecated and ignored by the Machine API (set it on the network)")
	}
	warnDeprecated(fp, r, map[string]bool{"networkId": f.NetworkID != "", "subnetpoolId": f.SubnetPoolID != "", //nolint:staticcheck // read only to convert or report a deprecated field
		"enableDhcp": f.DeprecatedEnableDHCP != nil, "marker": f.DeprecatedMarker != "", "limit": f.DeprecatedLimit != 0, //nolint:staticcheck // read only to convert or report a deprecated field
		"sortKey": f.DeprecatedSortKey != "", "sortDir": f.DeprecatedSortDir != ""}) //nolint:staticcheck // read only to convert or report a deprecated field
	id := aliasID(s.UUID, f.ID, path.Child("uuid"), fp.Child("id"), r)
	filter := &capov1.SubnetFilter{Name: f.Name, Description: f.Description, ProjectID: projectID(f.ProjectID, f.TenantID, fp, r),
		IPVersion: f.IPVersion, GatewayIP: f.GatewayIP, CIDR: f.CIDR, IPv6AddressMode: f.IPv6AddressMode, IPv6RAMode: f.IPv6RAMode,
		FilterByNeutronTags: neutronTags(f.Tags, f.TagsAny, f.NotTags, f.NotTagsAny, fp, r)}
	switch {
	case id != "":
		if !checkUUID(id, path.Child("uuid"), r) {
			return capov1.SubnetParam{}, false
		}
		if !filter.IsZero() {
			r.Warn(fp, "dropped: CAPO takes a subnet by id or by filter, and the id names it")
		}
		return capov1.SubnetParam{ID: ptr.To(id)}, true
	case !filter.IsZero():
		return capov1.SubnetParam{Filter: filter}, true
	}
	r.Error(field.Required(path, "a subnet needs a uuid or a filter"))
	return capov1.SubnetParam{}, false
}

// securityGroupToCAPO converts a security group, named by uuid, name or filter.
func securityGroupToCAPO(sg mapov1.SecurityGroupParam, path *field.Path, r *convert.Report) (capov1.SecurityGroupParam, bool) {
	fp := path.Child("filter")
	f := sg.Filter
	warnDeprecated(fp, r, map[string]bool{"limit": f.DeprecatedLimit != 0, "marker": f.DeprecatedMarker != "", //nolint:staticcheck // read only to convert or report a deprecated field
		"sortKey": f.DeprecatedSortKey != "", "sortDir": f.DeprecatedSortDir != ""}) //nolint:staticcheck // read only to convert or report a deprecated field
	id := aliasID(sg.UUID, f.ID, path.Child("uuid"), fp.Child("id"), r)
	name := sg.Name
	switch {
	case f.Name == "":
	case name == "":
		name = f.Name
		r.Warn(fp.Child("name"), "converting back writes it as name")
	case name == f.Name:
		r.Warn(fp.Child("name"), "dropped: repeats name")
	default:
		r.Error(field.Invalid(fp.Child("name"), f.Name, "differs from name "+name+"; no security group has both"))
		return capov1.SecurityGroupParam{}, false
	}
	filter := &capov1.SecurityGroupFilter{Name: name, Description: f.Description, ProjectID: projectID(f.ProjectID, f.TenantID, fp, r),
		FilterByNeutronTags: neutronTags(f.Tags, f.TagsAny, f.NotTags, f.NotTagsAny, fp, r)}
	switch {
	case id != "":
		if !checkUUID(id, path.Child("uuid"), r) {
			return capov1.SecurityGroupParam{}, false
		}
		if !filter.IsZero() {
			r.Warn(path, "name and filter dropped: CAPO takes a security group by id or by filter, and the id names it")
		}
		return capov1.SecurityGroupParam{ID: ptr.To(id)}, true
	case !filter.IsZero():
		return capov1.SecurityGroupParam{Filter: filter}, true
	}
	r.Error(field.Required(path, "a security group needs a uuid, a name or a filter"))
	return capov1.SecurityGroupParam{}, false
}

// portToCAPO converts one providerSpec port.
func portToCAPO(pt mapov1.PortOpts, path *field.Path, r *convert.Report) (capov1.PortOpts, bool) {
	ok := true
	out := capov1.PortOpts{NameSuffix: nonEmpty(pt.NameSuffix), Description: nonEmpty(pt.Description), Trunk: copyBool(pt.Trunk)}
	if pt.NetworkID == "" {
		r.Error(field.Required(path.Child("networkID"), ""))
		ok = false
	} else {
		ok = checkUUID(pt.NetworkID, path.Child("networkID"), r) && ok
		out.Network = &capov1.NetworkParam{ID: ptr.To(pt.NetworkID)}
	}
	for k, fixed := range pt.FixedIPs {
		fp := path.Child("fixedIPs").Index(k)
		if fixed.SubnetID == "" && fixed.IPAddress == "" {
			r.Error(field.Required(fp, "a subnetID or an ipAddress"))
			ok = false
			continue
		}
		v := capov1.FixedIP{IPAddress: nonEmpty(fixed.IPAddress)}
		if fixed.SubnetID != "" {
			ok = checkUUID(fixed.SubnetID, fp.Child("subnetID"), r) && ok
			v.Subnet = &capov1.SubnetParam{ID: ptr.To(fixed.SubnetID)}
		}
		out.FixedIPs = append(out.FixedIPs, v)
	}
	warnDeprecated(path, r, map[string]bool{"tenantID": pt.TenantID != "", "projectID": pt.ProjectID != "", "hostID": pt.DeprecatedHostID != ""})
	if sgs := pt.SecurityGroups; sgs != nil {
		if len(*sgs) == 0 {
			r.Error(field.Invalid(path.Child("securityGroups"), "[]", "an empty list gives the port no security groups; CAPO cannot express that (an empty list means the machine's)"))
			ok = false
		}
		for k, id := range *sgs {
			ok = checkUUID(id, path.Child("securityGroups").Index(k), r) && ok
			out.SecurityGroups = append(out.SecurityGroups, capov1.SecurityGroupParam{ID: ptr.To(id)})
		}
	}
	for k, ap := range pt.AllowedAddressPairs {
		if ap.IPAddress == "" {
			r.Error(field.Required(path.Child("allowedAddressPairs").Index(k).Child("ipAddress"), ""))
			ok = false
		}
		out.AllowedAddressPairs = append(out.AllowedAddressPairs, capov1.AddressPair{IPAddress: ap.IPAddress, MACAddress: nonEmpty(ap.MACAddress)})
	}
	out.Tags = portTagsToCAPO(pt.Tags, path.Child("tags"), r)
	out.AdminStateUp = copyBool(pt.AdminStateUp)
	out.MACAddress = nonEmpty(pt.MACAddress)
	out.VNICType = nonEmpty(pt.VNICType)
	out.Profile = profileToCAPO(pt.Profile, path.Child("profile"), r)
	out.DisablePortSecurity = invert(pt.PortSecurity)
	return out, ok
}

// The binding profile values CAPO writes.
const (
	profileCapabilities = "capabilities"
	profileTrusted      = "trusted"
	switchdev           = `["switchdev"]`
)

// profileToCAPO converts a port's binding profile. CAPO sets two things in it: the switchdev
// capability (OVS hardware offload) and a trusted virtual function.
func profileToCAPO(m map[string]string, path *field.Path, r *convert.Report) *capov1.BindingProfile {
	if len(m) == 0 {
		return nil
	}
	out := &capov1.BindingProfile{}
	for _, k := range sortedKeys(m) {
		v, kp := m[k], path.Key(k)
		switch {
		case k == profileCapabilities && v == switchdev:
			out.OVSHWOffload = ptr.To(true)
		case k == profileCapabilities && strings.Contains(v, "switchdev"):
			out.OVSHWOffload = ptr.To(true)
			r.Warn(kp, "read as the switchdev capability; converting back writes %s", switchdev)
		case k == profileCapabilities:
			r.Error(field.Invalid(kp, v, "CAPO's binding profile sets only the switchdev capability (ovsHWOffload)"))
		case k == profileTrusted && v == "true":
			out.TrustedVF = ptr.To(true)
		case k == profileTrusted && v == "false":
			r.Warn(kp, "dropped: an untrusted virtual function is the default")
		case k == profileTrusted:
			r.Error(field.NotSupported(kp, v, []string{"true", "false"}))
		default:
			r.Error(field.NotSupported(path, k, []string{profileCapabilities, profileTrusted}))
		}
	}
	if *out == (capov1.BindingProfile{}) {
		return nil
	}
	return out
}

// portTagsToCAPO copies port tags, which CAPO keeps as a set.
func portTagsToCAPO(tags []string, path *field.Path, r *convert.Report) []string {
	var out []string
	for _, t := range tags {
		switch {
		case t == "":
			r.Error(field.Invalid(path, tags, "tags cannot be empty"))
		case slices.Contains(out, t):
			r.Warn(path, "repeats tag %q; CAPO keeps port tags as a set", t)
		default:
			out = append(out, t)
		}
	}
	return out
}

// aliasID returns the id of a reference that may be given as uuid or as the deprecated
// filter.id (read only when uuid is unset).
func aliasID(uuid, filterID string, uuidPath, filterPath *field.Path, r *convert.Report) string {
	switch {
	case filterID == "":
		return uuid
	case uuid == "":
		r.Warn(filterPath, "deprecated; read as the id, which converting back writes as %s", uuidPath.String())
		return filterID
	case uuid == filterID:
		r.Warn(filterPath, "dropped: deprecated, and it repeats the uuid")
	default:
		r.Warn(filterPath, "dropped: deprecated, and the Machine API ignores it because uuid is set")
	}
	return uuid
}

// projectID reads a filter's project, given as projectId or the deprecated tenantId.
func projectID(project, tenant string, path *field.Path, r *convert.Report) string {
	switch {
	case tenant == "":
	case project == "":
		r.Warn(path.Child("tenantId"), "deprecated; read as the project, which converting back writes as projectId")
		return tenant
	default:
		r.Warn(path.Child("tenantId"), "dropped: deprecated, and the Machine API ignores it because projectId is set")
	}
	return project
}

// neutronTags splits the comma-separated tag filters into CAPO's lists.
func neutronTags(tags, tagsAny, not, notAny string, path *field.Path, r *convert.Report) capov1.FilterByNeutronTags {
	return capov1.FilterByNeutronTags{
		Tags:       splitTags(tags, path.Child("tags"), r),
		TagsAny:    splitTags(tagsAny, path.Child("tagsAny"), r),
		NotTags:    splitTags(not, path.Child("notTags"), r),
		NotTagsAny: splitTags(notAny, path.Child("notTagsAny"), r),
	}
}

func splitTags(s string, path *field.Path, r *convert.Report) []capov1.NeutronTag {
	if s == "" {
		return nil
	}
	var out []capov1.NeutronTag
	for _, t := range strings.Split(s, ",") {
		switch {
		case t == "":
			r.Warn(path, "empty tags dropped from %q", s)
		case slices.Contains(tagStrings(out), t):
			r.Warn(path, "repeated tag %q dropped; CAPO keeps tag filters as sets", t)
		default:
			out = append(out, capov1.NeutronTag(t))
		}
	}
	return out
}

func tagStrings(ts []capov1.NeutronTag) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = string(t)
	}
	return out
}

// warnDeprecated warns about each set field (by JSON name) the Machine API ignores.
func warnDeprecated(path *field.Path, r *convert.Report, set map[string]bool) {
	for _, name := range sortedKeys(set) {
		if set[name] {
			r.Warn(path.Child(name), "dropped: deprecated and ignored by the Machine API")
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// invert turns portSecurity into disablePortSecurity and back.
func invert(b *bool) *bool {
	if b == nil {
		return nil
	}
	return ptr.To(!*b)
}
