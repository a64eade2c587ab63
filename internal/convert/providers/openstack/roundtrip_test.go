package openstack

import (
	"fmt"
	"slices"
	"testing"

	mapov1 "github.com/openshift/api/machine/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	capov1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/machina-dev/machina/internal/convert"
	ct "github.com/machina-dev/machina/internal/convert/converttest"
)

const cluster = "ostest-8kq2x"

// vips are the API and ingress virtual IPs of the test cluster.
var vips = []string{"10.0.0.5", "10.0.0.7"}

var testCtx = convert.Context{ClusterName: cluster, Platform: Platform{VIPs: vips}, Namespaces: convert.OpenShiftNamespaces}

var suite = ct.Suite[*mapov1.OpenstackProviderSpec, *capov1.OpenStackMachineSpec]{
	Checker:            ct.Checker{Ctx: testCtx, DecodeProviderSpec: ct.DecodeJSON[mapov1.OpenstackProviderSpec]},
	ProviderSpec:       genProviderSpec,
	RandomProviderSpec: randomProviderSpec,
	ProviderID:         genProviderID,
	InfraSpec:          genSpec,
	RandomCAPIMachine:  randomCAPIMachine,
	MinAcceptedPercent: 5,
	ProviderSpecSeeds: []string{
		`{"apiVersion":"machine.openshift.io/v1alpha1","kind":"OpenstackProviderSpec","flavor":"m1.xlarge","image":"rhcos","cloudName":"openstack","cloudsSecret":{"name":"openstack-cloud-credentials","namespace":"openshift-machine-api"},"networks":[{"filter":{},"subnets":[{"filter":{"name":"nodes","tags":"openshiftClusterID=x"}}]}],"securityGroups":[{"filter":{},"name":"x-worker"}],"userDataSecret":{"name":"worker-user-data"}}`,
		`{"networks":[{"filter":{}}],"ports":[{"networkID":"","fixedIPs":[{}]}],"rootVolume":{"diskSize":-1}}`,
		`{"additionalBlockDevices":[{"name":"root","sizeGiB":0,"storage":{"type":"Tape"}}],"floatingIP":"1.2.3.4"}`,
		`null`,
	},
}

// TestRoundTrip runs the shared round-trip properties (see converttest.Suite) on OpenStack objects.
func TestRoundTrip(t *testing.T) { suite.Run(t) }

// TestRoundTripOffline runs them again as offline conversion without the Infrastructure does:
// the virtual IPs are unknown, so the generated networks carry noAllowedAddressPairs and the
// network-like ports no address pairs, and both still convert without loss or warning.
func TestRoundTripOffline(t *testing.T) {
	s := suite
	s.Ctx = convert.Context{ClusterName: cluster, Platform: New(), Namespaces: convert.OpenShiftNamespaces}
	s.ProviderSpec = func(g *ct.Gen) *mapov1.OpenstackProviderSpec {
		ps := genProviderSpec(g)
		for i := range ps.Networks {
			ps.Networks[i].NoAllowedAddressPairs = true
		}
		return ps
	}
	s.InfraSpec = func(g *ct.Gen) *capov1.OpenStackMachineSpec {
		spec := genSpec(g)
		for i := range spec.Ports {
			spec.Ports[i].AllowedAddressPairs = nil
		}
		return spec
	}
	s.Run(t)
}

func FuzzRoundTrip(f *testing.F) { suite.FuzzRoundTrip(f) }

func FuzzProviderSpecBytes(f *testing.F) { suite.FuzzProviderSpecBytes(f) }

func BenchmarkConvert(b *testing.B) { suite.Benchmark(b) }

func genUUID(g *ct.Gen) string {
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", g.Uint32(), g.Intn(1<<16), g.Intn(1<<12), g.Intn(1<<12), g.Int63n(1<<48))
}

func genProviderID(g *ct.Gen) string { return ct.Pick(g, "", "openstack:///"+genUUID(g)) }

// genTags returns up to n distinct tokens.
func genTags(g *ct.Gen, n int) []string {
	var out []string
	for i := g.Intn(n + 1); i > 0; i-- {
		if t := g.Token(); !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

func genProfile(g *ct.Gen) map[string]string {
	switch g.Intn(4) {
	case 1:
		return map[string]string{profileCapabilities: switchdev}
	case 2:
		return map[string]string{profileTrusted: "true"}
	case 3:
		return map[string]string{profileCapabilities: switchdev, profileTrusted: "true"}
	}
	return nil
}

func genSubnet(g *ct.Gen) mapov1.SubnetParam {
	if g.Maybe() {
		return mapov1.SubnetParam{UUID: genUUID(g)}
	}
	return mapov1.SubnetParam{Filter: mapov1.SubnetFilter{Name: g.Token(), Tags: ct.Pick(g, "", "openshiftClusterID="+cluster), IPVersion: ct.Pick(g, 0, 4, 6)}}
}

// genNetwork returns a networks entry in one of the forms the installer writes.
func genNetwork(g *ct.Gen) mapov1.NetworkParam {
	n := mapov1.NetworkParam{PortTags: genTags(g, 2), VNICType: ct.Pick(g, "", "direct"), Profile: genProfile(g),
		PortSecurity: g.BoolPtr(), NoAllowedAddressPairs: g.Maybe()}
	switch g.Intn(3) {
	case 0: // only a subnet: one port on the subnet's network
		n.Subnets = []mapov1.SubnetParam{genSubnet(g)}
		return n
	case 1:
		n.UUID = genUUID(g)
	case 2:
		n.Filter = mapov1.Filter{Name: g.Token(), NotTags: ct.Pick(g, "", "a,b")}
	}
	for i := g.Intn(3); i > 0; i-- {
		n.Subnets = append(n.Subnets, genSubnet(g))
	}
	return n
}

// genPort returns a port; its name suffix keeps it a port when converted back.
func genPort(g *ct.Gen) mapov1.PortOpts {
	pt := mapov1.PortOpts{NetworkID: genUUID(g), NameSuffix: g.Token(), Description: ct.Pick(g, "", "storage"),
		AdminStateUp: g.BoolPtr(), MACAddress: ct.Pick(g, "", "fa:16:3e:00:00:01"), Tags: genTags(g, 2),
		VNICType: ct.Pick(g, "", "direct", "normal"), Profile: genProfile(g), PortSecurity: g.BoolPtr(), Trunk: g.BoolPtr()}
	for i := g.Intn(3); i > 0; i-- {
		f := mapov1.FixedIPs{SubnetID: genUUID(g)}
		switch g.Intn(3) {
		case 1:
			f.IPAddress = fmt.Sprintf("192.168.%d.%d", g.Intn(256), 1+g.Intn(254))
		case 2:
			f.SubnetID, f.IPAddress = "", "192.168.0.10"
		}
		pt.FixedIPs = append(pt.FixedIPs, f)
	}
	if g.Maybe() {
		sgs := []string{genUUID(g)}
		pt.SecurityGroups = &sgs
	}
	if g.Maybe() {
		pt.AllowedAddressPairs = []mapov1.AddressPair{{IPAddress: "192.168.10.0/24", MACAddress: ct.Pick(g, "", "fa:16:3e:00:00:02")}}
	}
	return pt
}

func genSecurityGroup(g *ct.Gen) mapov1.SecurityGroupParam {
	switch g.Intn(3) {
	case 0:
		return mapov1.SecurityGroupParam{UUID: genUUID(g)}
	case 1:
		return mapov1.SecurityGroupParam{Name: cluster + "-" + ct.Pick(g, "worker", "master")}
	}
	return mapov1.SecurityGroupParam{Name: ct.Pick(g, "", g.Token()), Filter: mapov1.SecurityGroupFilter{ProjectID: g.Token(), TagsAny: "x,y"}}
}

func genBlockDevices(g *ct.Gen) []mapov1.AdditionalBlockDevice {
	var out []mapov1.AdditionalBlockDevice
	for i, name := range []string{"etcd", "data"}[:g.Intn(3)] {
		d := mapov1.AdditionalBlockDevice{Name: name, SizeGiB: 1 + g.Intn(100) + i}
		if g.Maybe() {
			d.Storage.Type = mapov1.LocalBlockDevice
		} else {
			d.Storage = mapov1.BlockDeviceStorage{Type: mapov1.VolumeBlockDevice,
				Volume: &mapov1.BlockDeviceVolume{Type: ct.Pick(g, "", "fast"), AvailabilityZone: ct.Pick(g, "", "cinder-az1")}}
		}
		out = append(out, d)
	}
	return out
}

// genProviderSpec returns an OpenstackProviderSpec in the form the converter accepts without
// warnings.
func genProviderSpec(g *ct.Gen) *mapov1.OpenstackProviderSpec {
	ps := &mapov1.OpenstackProviderSpec{
		Flavor:           ct.Pick(g, "m1.xlarge", "m1.large", "ci.m4.xlarge"),
		Image:            ct.Pick(g, cluster+"-rhcos", "rhcos-"+g.Token()),
		KeyName:          ct.Pick(g, "", "ssh-"+g.Token()),
		AvailabilityZone: ct.Pick(g, "", "nova", "az-"+g.Token()),
		UserDataSecret:   &corev1.SecretReference{Name: ct.Pick(g, "worker-user-data", g.Token())},
		Trunk:            g.Maybe(),
		Tags:             genTags(g, 3),
		ServerMetadata:   g.Map(),
		ConfigDrive:      g.BoolPtr(),
	}
	ps.APIVersion, ps.Kind = mapov1.GroupVersion.String(), ProviderSpecKind
	if g.Intn(4) > 0 {
		ps.CloudsSecret = &corev1.SecretReference{Name: "openstack-cloud-credentials", Namespace: DefaultSecretNamespace}
		ps.CloudName = ct.Pick(g, "openstack", "shiftstack")
	}
	for i := g.Intn(3); i > 0; i-- {
		ps.Networks = append(ps.Networks, genNetwork(g))
	}
	for i := g.Intn(3); i > 0; i-- {
		ps.Ports = append(ps.Ports, genPort(g))
	}
	for i := g.Intn(3); i > 0; i-- {
		ps.SecurityGroups = append(ps.SecurityGroups, genSecurityGroup(g))
	}
	if g.Maybe() {
		ps.RootVolume = &mapov1.RootVolume{Size: 1 + g.Intn(500), VolumeType: ct.Pick(g, "", "ssd"), Zone: ct.Pick(g, "", "cinder-az2")}
	}
	ps.AdditionalBlockDevices = genBlockDevices(g)
	switch g.Intn(3) {
	case 1:
		ps.ServerGroupID = genUUID(g)
	case 2:
		ps.ServerGroupName = cluster + "-worker"
	}
	return ps
}

// randomProviderSpec is an arbitrary providerSpec, nudged half of the time towards values
// the converter accepts so both outcomes are exercised.
func randomProviderSpec(g *ct.Gen) *mapov1.OpenstackProviderSpec {
	var ps mapov1.OpenstackProviderSpec
	g.Fill.Fill(&ps)
	if g.Maybe() {
		return &ps
	}
	ok := genProviderSpec(g)
	for i := g.Intn(3); i >= 0; i-- {
		switch g.Intn(9) {
		case 0:
			ok.Networks = ps.Networks
		case 1:
			ok.Ports = ps.Ports
		case 2:
			ok.SecurityGroups = ps.SecurityGroups
		case 3:
			ok.RootVolume, ok.Image = ps.RootVolume, ps.Image
		case 4:
			ok.AdditionalBlockDevices = ps.AdditionalBlockDevices
		case 5:
			ok.CloudsSecret, ok.CloudName, ok.UserDataSecret = ps.CloudsSecret, ps.CloudName, ps.UserDataSecret
		case 6:
			ok.ServerGroupID, ok.ServerGroupName, ok.Tags = ps.ServerGroupID, ps.ServerGroupName, ps.Tags
		case 7:
			ok.TypeMeta, ok.FloatingIP, ok.PrimarySubnet = ps.TypeMeta, ps.FloatingIP, ps.PrimarySubnet //nolint:staticcheck // arbitrary input includes deprecated fields
		case 8:
			ok.Flavor, ok.SshUserName, ok.ServerMetadata = ps.Flavor, ps.SshUserName, ps.ServerMetadata
		}
	}
	return ok
}

// genSpec returns an OpenStackMachine spec in the form the converter accepts without warnings.
func genSpec(g *ct.Gen) *capov1.OpenStackMachineSpec {
	s := &capov1.OpenStackMachineSpec{
		Flavor:      ptr.To(ct.Pick(g, "m1.xlarge", "m1.large")),
		Image:       capov1.ImageParam{Filter: &capov1.ImageFilter{Name: ptr.To("rhcos-" + g.Token())}},
		SSHKeyName:  ct.Pick(g, "", "ssh"),
		Trunk:       g.Maybe(),
		Tags:        genTags(g, 3),
		ConfigDrive: g.BoolPtr(),
	}
	for _, k := range sortedKeys(g.Map()) {
		s.ServerMetadata = append(s.ServerMetadata, capov1.ServerMetadata{Key: k, Value: g.Token()})
	}
	if g.Maybe() {
		s.IdentityRef = &capov1.OpenStackIdentityReference{Name: "openstack-cloud-credentials", CloudName: "openstack"}
	}
	switch g.Intn(3) {
	case 1:
		s.ServerGroup = &capov1.ServerGroupParam{ID: ptr.To(genUUID(g))}
	case 2:
		s.ServerGroup = &capov1.ServerGroupParam{Filter: &capov1.ServerGroupFilter{Name: ptr.To("workers")}}
	}
	zone := func() *capov1.VolumeAvailabilityZone {
		if g.Maybe() {
			return &capov1.VolumeAvailabilityZone{From: capov1.VolumeAZFromMachine}
		}
		return &capov1.VolumeAvailabilityZone{From: capov1.VolumeAZFromName, Name: ptr.To(capov1.VolumeAZName("az-" + g.Token()))}
	}
	if g.Maybe() {
		s.RootVolume = &capov1.RootVolume{SizeGiB: 1 + g.Intn(200), BlockDeviceVolume: capov1.BlockDeviceVolume{Type: ct.Pick(g, "", "ssd"), AvailabilityZone: zone()}}
	}
	if g.Maybe() {
		s.AdditionalBlockDevices = []capov1.AdditionalBlockDevice{{Name: "etcd", SizeGiB: 10, Storage: capov1.BlockDeviceStorage{Type: capov1.LocalBlockDevice}},
			{Name: "data", SizeGiB: 50, Storage: capov1.BlockDeviceStorage{Type: capov1.VolumeBlockDevice, Volume: &capov1.BlockDeviceVolume{AvailabilityZone: zone()}}}}
	}
	for i := g.Intn(3); i > 0; i-- {
		if g.Maybe() {
			s.SecurityGroups = append(s.SecurityGroups, capov1.SecurityGroupParam{ID: ptr.To(genUUID(g))})
		} else {
			s.SecurityGroups = append(s.SecurityGroups, capov1.SecurityGroupParam{Filter: &capov1.SecurityGroupFilter{Name: g.Token(),
				FilterByNeutronTags: capov1.FilterByNeutronTags{Tags: []capov1.NeutronTag{"a", "b"}}}})
		}
	}
	s.Ports = genPorts(g)
	return s
}

// genPorts returns network-like ports, then ports only a providerSpec port describes.
func genPorts(g *ct.Gen) []capov1.PortOpts {
	var out []capov1.PortOpts
	for i := g.Intn(3); i > 0; i-- {
		c := capov1.PortOpts{Tags: genTags(g, 2)}
		if g.Maybe() {
			c.AllowedAddressPairs = []capov1.AddressPair{{IPAddress: vips[0]}, {IPAddress: vips[1]}}
		}
		c.DisablePortSecurity = g.BoolPtr()
		subnet := capov1.SubnetParam{ID: ptr.To(genUUID(g))}
		switch g.Intn(3) {
		case 0:
			c.FixedIPs = []capov1.FixedIP{{Subnet: &subnet}}
		case 1:
			c.Network = &capov1.NetworkParam{ID: ptr.To(genUUID(g))}
		case 2:
			c.Network = &capov1.NetworkParam{Filter: &capov1.NetworkFilter{Name: "machines", ProjectID: g.Token()}}
			c.FixedIPs = []capov1.FixedIP{{Subnet: &capov1.SubnetParam{Filter: &capov1.SubnetFilter{CIDR: "10.0.0.0/16"}}}}
		}
		out = append(out, c)
	}
	for i := g.Intn(3); i > 0; i-- {
		c := capov1.PortOpts{Network: &capov1.NetworkParam{ID: ptr.To(genUUID(g))}, NameSuffix: ptr.To(g.Token()), Trunk: g.BoolPtr(),
			FixedIPs: []capov1.FixedIP{{Subnet: &capov1.SubnetParam{ID: ptr.To(genUUID(g))}, IPAddress: g.StrPtr()}}}
		c.VNICType = g.StrPtr()
		if g.Maybe() {
			c.Profile = &capov1.BindingProfile{OVSHWOffload: ptr.To(true)}
		}
		if g.Maybe() {
			c.SecurityGroups = []capov1.SecurityGroupParam{{ID: ptr.To(genUUID(g))}}
		}
		out = append(out, c)
	}
	return out
}

// randomCAPIMachine is an arbitrary Cluster API Machine and OpenStackMachine spec, each
// nudged most of the time towards values the converter accepts.
func randomCAPIMachine(g *ct.Gen) (*clusterv1.Machine, *capov1.OpenStackMachineSpec, string) {
	var m clusterv1.Machine
	var spec capov1.OpenStackMachineSpec
	g.Fill.Fill(&m)
	g.Fill.Fill(&spec)
	pid := genProviderID(g)
	if g.Intn(3) > 0 {
		m = *g.CAPIMachine(testCtx, pid)
	}
	if g.Intn(3) > 0 {
		ok := genSpec(g)
		switch g.Intn(6) {
		case 0:
			ok.Ports = spec.Ports
		case 1:
			ok.SecurityGroups, ok.ServerGroup = spec.SecurityGroups, spec.ServerGroup
		case 2:
			ok.RootVolume, ok.AdditionalBlockDevices = spec.RootVolume, spec.AdditionalBlockDevices
		case 3:
			ok.Image, ok.Flavor, ok.FlavorID = spec.Image, spec.Flavor, spec.FlavorID
		case 4:
			ok.IdentityRef, ok.FloatingIPPoolRef, ok.SchedulerHintAdditionalProperties = spec.IdentityRef, spec.FloatingIPPoolRef, spec.SchedulerHintAdditionalProperties
		case 5:
			ok.ServerMetadata, ok.Tags = spec.ServerMetadata, spec.Tags
		}
		spec = *ok
	}
	return &m, &spec, m.Spec.ProviderID
}
