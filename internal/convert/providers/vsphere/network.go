package vsphere

import (
	"net/netip"
	"regexp"

	mapiv1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	capvv1 "sigs.k8s.io/cluster-api-provider-vsphere/api/govmomi/v1beta2"

	"github.com/machina-dev/machina/internal/convert"
)

// ipamGroup is the API group of the Cluster API's in-cluster IP address pools; the Machine API
// claims addresses from it when a pool names no group.
const ipamGroup = "ipam.cluster.x-k8s.io"

// poolResource is what the Machine API accepts as a pool's resource; it puts the value in its
// IPAddressClaims' spec.poolRef.kind unchanged, which is where CAPV puts the pool's kind.
var poolResource = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// maxIPAddrLength is the longest address CAPV's CRD accepts in ipAddrs.
const maxIPAddrLength = 39

// networkToCAPV converts the network devices. A device with neither addresses nor pools gets
// its address by DHCP in the Machine API; CAPV needs that said (dhcp4).
func networkToCAPV(in mapiv1.NetworkSpec, path *field.Path, r *convert.Report) capvv1.NetworkSpec {
	dp := path.Child("devices")
	if len(in.Devices) == 0 {
		r.Error(field.Required(dp, "CAPV clones a VM with at least one network device"))
	}
	var out capvv1.NetworkSpec
	for i, d := range in.Devices {
		out.Devices = append(out.Devices, deviceToCAPV(d, dp.Index(i), r))
	}
	return out
}

func deviceToCAPV(d mapiv1.NetworkDeviceSpec, path *field.Path, r *convert.Report) capvv1.NetworkDeviceSpec {
	if d.NetworkName == "" {
		r.Error(field.Required(path.Child("networkName"), "CAPV needs the port group; the Machine API leaves it to vCenter"))
	}
	out := capvv1.NetworkDeviceSpec{NetworkName: d.NetworkName, Nameservers: append([]string(nil), d.Nameservers...)}
	for i, a := range d.IPAddrs {
		switch _, err := netip.ParsePrefix(a); {
		case err != nil:
			r.Error(field.Invalid(path.Child("ipAddrs").Index(i), a, "an address with its prefix length, e.g. 192.168.1.100/24 (CAPV accepts no other)"))
		case len(a) > maxIPAddrLength:
			r.Error(field.TooLong(path.Child("ipAddrs").Index(i), a, maxIPAddrLength))
		}
	}
	out.IPAddrs = append([]string(nil), d.IPAddrs...)
	for i, n := range d.Nameservers {
		if _, err := netip.ParseAddr(n); err != nil {
			r.Error(field.Invalid(path.Child("nameservers").Index(i), n, "an IP address"))
		}
	}
	if d.Gateway != "" {
		switch gw, err := netip.ParseAddr(d.Gateway); {
		case err != nil:
			r.Error(field.Invalid(path.Child("gateway"), d.Gateway, "an IPv4 or IPv6 address"))
		case gw.Is4():
			out.Gateway4 = d.Gateway
		default:
			out.Gateway6 = d.Gateway
		}
	}
	for i, p := range d.AddressesFromPools {
		pp := path.Child("addressesFromPools").Index(i)
		if p.Name == "" {
			r.Error(field.Required(pp.Child("name"), ""))
		}
		if !poolResource.MatchString(p.Resource) {
			r.Error(field.Invalid(pp.Child("resource"), p.Resource, "the pool's kind as the IPAM controller knows it, lower-case"))
		}
		g := p.Group
		if g == "" {
			g = ipamGroup
		}
		out.AddressesFromPools = append(out.AddressesFromPools, capvv1.IPPoolReference{APIGroup: g, Kind: p.Resource, Name: p.Name})
	}
	if len(d.IPAddrs) == 0 && len(d.AddressesFromPools) == 0 {
		out.DHCP4 = ptr.To(true)
	} else {
		r.Warn(path, StaticAddressWarning)
	}
	return out
}

// StaticAddressWarning is the warning on a device with static addresses (ipAddrs or
// addressesFromPools): the two actuators hand them to the guest differently.
const StaticAddressWarning = "static addresses: the Machine API passes them to RHCOS as kernel arguments (guestinfo.afterburn.initrd.network-kargs), " +
	"CAPV as cloud-init network metadata (guestinfo.metadata), which RHCOS does not read; a VM CAPV clones from this spec may come up " +
	"without them (a running VM handed over keeps its addresses)"

// networkToMAPI is the reverse of networkToCAPV.
func networkToMAPI(in capvv1.NetworkSpec, path *field.Path, r *convert.Report) mapiv1.NetworkSpec {
	if len(in.Routes) > 0 {
		r.Unsupported(path.Child("routes"), in.Routes, convert.MachineAPI)
	}
	dp := path.Child("devices")
	if len(in.Devices) == 0 {
		r.Error(field.Required(dp, "the Machine API clones a VM with the devices named, none here"))
	}
	out := mapiv1.NetworkSpec{Devices: []mapiv1.NetworkDeviceSpec{}}
	for i, d := range in.Devices {
		out.Devices = append(out.Devices, deviceToMAPI(d, dp.Index(i), r))
	}
	return out
}

func deviceToMAPI(d capvv1.NetworkDeviceSpec, path *field.Path, r *convert.Report) mapiv1.NetworkDeviceSpec {
	deviceOnlyCAPV(d, path, r)
	out := mapiv1.NetworkDeviceSpec{NetworkName: d.NetworkName, IPAddrs: append([]string(nil), d.IPAddrs...), Nameservers: append([]string(nil), d.Nameservers...)}
	if d.NetworkName == "" {
		r.Error(field.Required(path.Child("networkName"), ""))
	}
	switch {
	case d.Gateway4 != "" && d.Gateway6 != "":
		r.Error(field.Invalid(path.Child("gateway6"), d.Gateway6, "the Machine API takes one gateway per device; gateway4 is set too"))
	case d.Gateway4 != "":
		out.Gateway = d.Gateway4
	default:
		out.Gateway = d.Gateway6
	}
	for i, p := range d.AddressesFromPools {
		pp := path.Child("addressesFromPools").Index(i)
		if !poolResource.MatchString(p.Kind) {
			r.Error(field.Invalid(pp.Child("kind"), p.Kind, "the Machine API names the pool's kind in its lower-case resource field and puts it in its IPAddressClaims' spec.poolRef.kind as is, so a kind with capitals cannot be expressed"))
		}
		out.AddressesFromPools = append(out.AddressesFromPools, mapiv1.AddressesFromPool{Group: p.APIGroup, Resource: p.Kind, Name: p.Name})
	}
	static := len(d.IPAddrs) > 0 || len(d.AddressesFromPools) > 0
	switch dhcp := ptr.Deref(d.DHCP4, false); {
	case dhcp && static:
		r.Error(field.Invalid(path.Child("dhcp4"), true, "the Machine API uses DHCP only on a device without ipAddrs and addressesFromPools"))
	case !dhcp && !static:
		r.Error(field.Invalid(path.Child("dhcp4"), d.DHCP4, "a device without ipAddrs and addressesFromPools gets its address by DHCP in the Machine API; set dhcp4: true"))
	}
	return out
}

// deviceOnlyCAPV refuses the device settings the Machine API cannot express.
func deviceOnlyCAPV(d capvv1.NetworkDeviceSpec, path *field.Path, r *convert.Report) {
	if ptr.Deref(d.DHCP6, false) {
		r.Unsupported(path.Child("dhcp6"), true, convert.MachineAPI+" (DHCP on a device without addresses is its only choice)")
	}
	for _, f := range []struct {
		name string
		set  bool
		v    any
	}{
		{"deviceName", d.DeviceName != "", d.DeviceName},
		{"mtu", d.MTU != nil, d.MTU},
		{"macAddr", d.MACAddr != "", d.MACAddr},
		{"routes", len(d.Routes) > 0, d.Routes},
		{"searchDomains", len(d.SearchDomains) > 0, d.SearchDomains},
		{"dhcp4Overrides", d.DHCP4Overrides != nil, d.DHCP4Overrides},
		{"dhcp6Overrides", d.DHCP6Overrides != nil, d.DHCP6Overrides},
		{"skipIPAllocation", ptr.Deref(d.SkipIPAllocation, false), true},
	} {
		if f.set {
			r.Unsupported(path.Child(f.name), f.v, convert.MachineAPI)
		}
	}
}
