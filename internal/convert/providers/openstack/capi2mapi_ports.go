package openstack

import (
	"strings"

	mapov1 "github.com/openshift/api/machine/v1alpha1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	capov1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"

	"github.com/machina-dev/machina/internal/convert"
)

// portsToMAPI splits CAPO's ports into the providerSpec's networks and ports. The Machine
// API attaches networks before ports, so leading ports that a networks entry can describe
// become networks, and the rest ports.
func (p Platform) portsToMAPI(ports []capov1.PortOpts, path *field.Path, r *convert.Report) ([]mapov1.NetworkParam, []mapov1.PortOpts) {
	var networks []mapov1.NetworkParam
	var out []mapov1.PortOpts
	asNetworks := true
	for i, c := range ports {
		pp := path.Index(i)
		if asNetworks && p.readsAsNetwork(c) {
			networks = append(networks, p.networkToMAPI(c, pp, r))
			continue
		}
		asNetworks = false
		if pt, ok := p.portToMAPI(c, pp, r); ok {
			out = append(out, pt)
		}
	}
	return networks, out
}

// readsAsNetwork reports whether a networks entry of the providerSpec describes the port:
// a network (by id or filter) with a fixed IP per subnet, or one subnet alone, and nothing
// but what such an entry sets.
func (p Platform) readsAsNetwork(c capov1.PortOpts) bool {
	if c.NameSuffix != nil || c.Description != nil || c.Trunk != nil || len(c.SecurityGroups) > 0 || c.AdminStateUp != nil ||
		c.MACAddress != nil || c.HostID != nil || c.PropagateUplinkStatus != nil || len(c.ValueSpecs) > 0 {
		return false
	}
	if _, ok := p.readPairs(c.AllowedAddressPairs); !ok {
		return false
	}
	for _, f := range c.FixedIPs {
		if f.Subnet == nil || f.IPAddress != nil {
			return false
		}
	}
	if c.Network == nil {
		return len(c.FixedIPs) == 1
	}
	return (c.Network.ID != nil) != (c.Network.Filter != nil)
}

// readPairs reads a port's allowed address pairs as a networks entry's noAllowedAddressPairs:
// none, or exactly the cluster's virtual IPs. ok is false when the pairs are something else,
// or when there are pairs and the virtual IPs are not known (offline without the
// Infrastructure): they cannot be told from other addresses, so the port stays a port.
func (p Platform) readPairs(pairs []capov1.AddressPair) (none, ok bool) {
	if len(pairs) == 0 {
		return p.VIPs == nil || len(p.VIPs) > 0, true
	}
	if p.VIPs == nil || len(pairs) != len(p.VIPs) {
		return false, false
	}
	for i, ap := range pairs {
		if ap.MACAddress != nil || ap.IPAddress != p.VIPs[i] {
			return false, false
		}
	}
	return false, true
}

// networkToMAPI converts a port that readsAsNetwork into a networks entry.
func (p Platform) networkToMAPI(c capov1.PortOpts, path *field.Path, r *convert.Report) mapov1.NetworkParam {
	n := mapov1.NetworkParam{PortTags: tagSetToMAPI(c.Tags, path.Child("tags"), r), VNICType: ptr.Deref(c.VNICType, "")}
	if c.Network != nil {
		if c.Network.ID != nil {
			checkUUID(*c.Network.ID, path.Child("network", "id"), r)
			n.UUID = *c.Network.ID
		} else {
			f := c.Network.Filter
			t := joinNeutronTags(f.FilterByNeutronTags, path.Child("network", "filter"), r)
			n.Filter = mapov1.Filter{Name: f.Name, Description: f.Description, ProjectID: f.ProjectID,
				Tags: t.tags, TagsAny: t.tagsAny, NotTags: t.notTags, NotTagsAny: t.notTagsAny}
		}
	}
	for k, fixed := range c.FixedIPs {
		n.Subnets = append(n.Subnets, subnetToMAPI(*fixed.Subnet, path.Child("fixedIPs").Index(k).Child("subnet"), r))
	}
	n.Profile = profileToMAPI(c.Profile, path.Child("profile"), r)
	n.PortSecurity = invert(c.DisablePortSecurity)
	n.NoAllowedAddressPairs, _ = p.readPairs(c.AllowedAddressPairs)
	return n
}

func subnetToMAPI(s capov1.SubnetParam, path *field.Path, r *convert.Report) mapov1.SubnetParam {
	switch {
	case s.ID != nil && s.Filter != nil:
		r.Error(field.Forbidden(path, "set an id or a filter, not both"))
	case s.ID != nil:
		checkUUID(*s.ID, path.Child("id"), r)
		return mapov1.SubnetParam{UUID: *s.ID}
	case !s.Filter.IsZero():
		f := s.Filter
		t := joinNeutronTags(f.FilterByNeutronTags, path.Child("filter"), r)
		return mapov1.SubnetParam{Filter: mapov1.SubnetFilter{Name: f.Name, Description: f.Description, ProjectID: f.ProjectID,
			IPVersion: f.IPVersion, GatewayIP: f.GatewayIP, CIDR: f.CIDR, IPv6AddressMode: f.IPv6AddressMode, IPv6RAMode: f.IPv6RAMode,
			Tags: t.tags, TagsAny: t.tagsAny, NotTags: t.notTags, NotTagsAny: t.notTagsAny}}
	default:
		r.Error(field.Required(path, "an id or a filter"))
	}
	return mapov1.SubnetParam{}
}

// whyNotANetwork explains why a port without a network id cannot convert back.
func (p Platform) whyNotANetwork(c capov1.PortOpts) string {
	const msg = "a Machine API port names its network by id, and "
	if p.VIPs == nil && len(c.AllowedAddressPairs) > 0 {
		return msg + "only a networks entry (which gets the cluster's virtual IPs as address pairs) could describe this port, but the virtual IPs are not known here " +
			"to compare its allowedAddressPairs with: give the Infrastructure (--infrastructure)"
	}
	return msg + "a networks entry cannot describe this port (or it follows one that only a port describes: the Machine API attaches networks before ports)"
}

// portToMAPI converts a port that no networks entry describes into a providerSpec port.
func (p Platform) portToMAPI(c capov1.PortOpts, path *field.Path, r *convert.Report) (mapov1.PortOpts, bool) {
	switch {
	case c.Network == nil || c.Network.ID == nil:
		r.Error(field.Required(path.Child("network", "id"), p.whyNotANetwork(c)))
		return mapov1.PortOpts{}, false
	case c.Network.Filter != nil:
		r.Error(field.Forbidden(path.Child("network"), "set an id or a filter, not both"))
		return mapov1.PortOpts{}, false
	}
	checkUUID(*c.Network.ID, path.Child("network", "id"), r)
	pt := mapov1.PortOpts{NetworkID: *c.Network.ID, NameSuffix: ptr.Deref(c.NameSuffix, ""), Description: ptr.Deref(c.Description, ""),
		AdminStateUp: copyBool(c.AdminStateUp), MACAddress: ptr.Deref(c.MACAddress, ""), Tags: tagSetToMAPI(c.Tags, path.Child("tags"), r),
		VNICType: ptr.Deref(c.VNICType, ""), PortSecurity: invert(c.DisablePortSecurity), Trunk: copyBool(c.Trunk)}
	for k, fixed := range c.FixedIPs {
		fp := path.Child("fixedIPs").Index(k)
		v := mapov1.FixedIPs{IPAddress: ptr.Deref(fixed.IPAddress, "")}
		switch s := fixed.Subnet; {
		case s == nil && v.IPAddress == "":
			r.Error(field.Required(fp, "a subnet id or an ipAddress"))
		case s == nil:
		case s.ID != nil && s.Filter == nil:
			checkUUID(*s.ID, fp.Child("subnet", "id"), r)
			v.SubnetID = *s.ID
		case s.Filter == nil:
			r.Error(field.Required(fp.Child("subnet"), "an id or a filter"))
		case s.ID != nil:
			r.Error(field.Forbidden(fp.Child("subnet"), "set an id or a filter, not both"))
		default:
			r.Unsupported(fp.Child("subnet"), "<filter>", convert.MachineAPI+" (its ports take subnets by id)")
		}
		pt.FixedIPs = append(pt.FixedIPs, v)
	}
	if len(c.SecurityGroups) > 0 {
		ids := make([]string, 0, len(c.SecurityGroups))
		for k, sg := range c.SecurityGroups {
			if sg.ID == nil || sg.Filter != nil {
				r.Unsupported(path.Child("securityGroups").Index(k), "<filter>", convert.MachineAPI+" (its ports take security groups by id)")
				continue
			}
			checkUUID(*sg.ID, path.Child("securityGroups").Index(k).Child("id"), r)
			ids = append(ids, *sg.ID)
		}
		pt.SecurityGroups = &ids
	}
	for _, ap := range c.AllowedAddressPairs {
		pt.AllowedAddressPairs = append(pt.AllowedAddressPairs, mapov1.AddressPair{IPAddress: ap.IPAddress, MACAddress: ptr.Deref(ap.MACAddress, "")})
	}
	pt.Profile = profileToMAPI(c.Profile, path.Child("profile"), r)
	if c.HostID != nil {
		r.Unsupported(path.Child("hostID"), *c.HostID, convert.MachineAPI)
	}
	if c.PropagateUplinkStatus != nil {
		r.Unsupported(path.Child("propagateUplinkStatus"), *c.PropagateUplinkStatus, convert.MachineAPI)
	}
	if len(c.ValueSpecs) > 0 {
		r.Unsupported(path.Child("valueSpecs"), len(c.ValueSpecs), convert.MachineAPI)
	}
	return pt, true
}

// profileToMAPI writes CAPO's binding profile as the Machine API's key/value profile.
func profileToMAPI(b *capov1.BindingProfile, path *field.Path, r *convert.Report) map[string]string {
	if b == nil {
		return nil
	}
	out := map[string]string{}
	switch v := b.OVSHWOffload; {
	case v == nil:
	case *v:
		out[profileCapabilities] = switchdev
	default:
		r.Warn(path.Child("ovsHWOffload"), "dropped: false is the default")
	}
	switch v := b.TrustedVF; {
	case v == nil:
	case *v:
		out[profileTrusted] = "true"
	default:
		r.Warn(path.Child("trustedVF"), "dropped: false is the default")
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// joinedTags are CAPO's tag filter lists as the Machine API's comma-separated strings.
type joinedTags struct{ tags, tagsAny, notTags, notTagsAny string }

func joinNeutronTags(f capov1.FilterByNeutronTags, path *field.Path, r *convert.Report) joinedTags {
	return joinedTags{
		tags:       joinTags(f.Tags, path.Child("tags"), r),
		tagsAny:    joinTags(f.TagsAny, path.Child("tagsAny"), r),
		notTags:    joinTags(f.NotTags, path.Child("notTags"), r),
		notTagsAny: joinTags(f.NotTagsAny, path.Child("notTagsAny"), r),
	}
}

func joinTags(tags []capov1.NeutronTag, path *field.Path, r *convert.Report) string {
	out := make([]string, 0, len(tags))
	for i, t := range tags {
		if t == "" || strings.Contains(string(t), ",") {
			r.Error(field.Invalid(path.Index(i), t, "a tag cannot be empty or contain a comma"))
			continue
		}
		out = append(out, string(t))
	}
	return strings.Join(out, ",")
}
