package ec2

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/machina-dev/machina/internal/cloud/api"
)

// maxLaunch is the most instances one RunInstances launches.
const maxLaunch = 100

// runInstances parses every parameter first (refusing unknown ones), then launches.
func (f *Front) runInstances(c *call) (any, error) {
	req, err := f.parseRun(c.p)
	if err != nil {
		return nil, err
	}
	if err := c.ready(); err != nil {
		return nil, err
	}
	if err := c.fault(f, nil, req.Tags); err != nil {
		return nil, err
	}
	res, err := f.m.Launch(c.ctx, req)
	if err != nil {
		return nil, ec2Error(err, map[string]string{"clientToken": "ClientToken", "image": "ImageId",
			"instanceType": "InstanceType", "zone": "Placement.AvailabilityZone", "userData": "UserData", "tags": "TagSpecification"})
	}
	out := &runInstancesResult{xReservation: f.reservation(res.Instances)}
	return out, nil
}

type runInstancesResult struct {
	head
	xReservation
}

// parseRun turns RunInstances parameters into a launch, checking each against the
// catalogue and naming the parameter at fault.
func (f *Front) parseRun(p *params) (LaunchRequest, error) {
	r := LaunchRequest{Region: f.net.region, Hash: p.hash()}
	var err error
	if r.Image, err = f.parseImage(p); err != nil {
		return r, err
	}
	if r.InstanceType, err = p.required("InstanceType"); err != nil {
		return r, err
	}
	itype, ok := f.net.types[r.InstanceType]
	if !ok {
		return r, badParam("InstanceType", "Invalid value '%s' for InstanceType (not in the catalogue)", r.InstanceType)
	}
	if a := f.net.images[r.Image].Architecture; a != "" && a != itype.Architecture {
		return r, badParam("ImageId", "The architecture '%s' of the instance type %s does not match the architecture '%s' of the AMI %s",
			ec2Arch(itype.Architecture), itype.Name, ec2Arch(a), r.Image)
	}
	if r.Count, err = parseCounts(p); err != nil {
		return r, err
	}
	if r.Token, err = parseToken(p); err != nil {
		return r, err
	}
	if r.UserData, err = parseUserData(p); err != nil {
		return r, err
	}
	e := &r.EC2
	e.ClientToken = p.str("ClientToken")
	e.KeyName = p.str("KeyName")
	e.VPCID = f.net.aws.VPC.ID
	if e.IAMInstanceProfile, err = f.parseProfile(p.sub("IamInstanceProfile")); err != nil {
		return r, err
	}
	if e.EBSOptimized, err = p.boolean("EbsOptimized", false); err != nil {
		return r, err
	}
	if e.Monitoring, err = p.boolean("Monitoring.Enabled", false); err != nil {
		return r, err
	}
	zone, err := f.parsePlacement(p.sub("Placement"), e)
	if err != nil {
		return r, err
	}
	if r.Zone, err = f.parseInterfaces(p, e, zone, itype); err != nil {
		return r, err
	}
	for _, ni := range e.NetworkInterfaces {
		r.Pools = append(r.Pools, AddressPool{Key: ni.SubnetID, CIDR: netip.MustParsePrefix(f.net.subnets[ni.SubnetID].CIDR)})
	}
	e.SubnetID = e.NetworkInterfaces[0].SubnetID
	if e.BlockDevices, err = parseBlockDevices(p); err != nil {
		return r, err
	}
	var volTags, eniTags map[string]string
	if r.Tags, volTags, eniTags, err = parseTagSpecs(p); err != nil {
		return r, err
	}
	for k := range e.BlockDevices {
		e.BlockDevices[k].Tags = volTags
	}
	for k := range e.NetworkInterfaces {
		e.NetworkInterfaces[k].Tags = eniTags
	}
	if err := parseOptions(p, e, itype); err != nil {
		return r, err
	}
	return r, nil
}

func (f *Front) parseImage(p *params) (string, error) {
	id, err := p.required("ImageId")
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(id, "ami-") {
		return "", errorf(http.StatusBadRequest, "InvalidAMIID.Malformed", "ImageId: Invalid id: \"%s\" (expecting \"ami-...\")", id)
	}
	if _, ok := f.net.images[id]; !ok {
		return "", errorf(http.StatusBadRequest, "InvalidAMIID.NotFound", "ImageId: The image id '[%s]' does not exist", id)
	}
	return id, nil
}

func parseCounts(p *params) (int, error) {
	if !p.has("MinCount") || !p.has("MaxCount") {
		return 0, errorf(http.StatusBadRequest, "MissingParameter", "The request must contain the parameters MinCount and MaxCount")
	}
	minC, err := p.integer("MinCount", 1, 1, 1<<20)
	if err != nil {
		return 0, err
	}
	maxC, err := p.integer("MaxCount", 1, 1, 1<<20)
	if err != nil {
		return 0, err
	}
	if minC > maxC {
		return 0, badParam("MinCount", "MinCount (%d) must not exceed MaxCount (%d)", minC, maxC)
	}
	if minC > maxLaunch {
		return 0, errorf(http.StatusBadRequest, "InstanceLimitExceeded", "MinCount: at most %d instances per request", maxLaunch)
	}
	return min(maxC, maxLaunch), nil
}

func parseToken(p *params) (string, error) {
	t := p.str("ClientToken")
	if len(t) > 64 {
		return "", badParam("ClientToken", "the client token is at most 64 characters")
	}
	if t == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		t = "anonymous-" + hex.EncodeToString(b[:])
	}
	return t, nil
}

func parseUserData(p *params) ([]byte, error) {
	s := p.str("UserData")
	if s == "" {
		return nil, nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, badParam("UserData", "Invalid BASE64 encoding of user data: %v", err)
	}
	return b, nil
}

func (f *Front) parseProfile(p *params) (string, error) {
	arn, name := p.str("Arn"), p.str("Name")
	switch {
	case arn != "" && name != "":
		return "", errorf(http.StatusBadRequest, "InvalidParameterCombination", "IamInstanceProfile: give Arn or Name, not both")
	case arn != "":
		if !strings.HasPrefix(arn, "arn:aws:iam::") || !strings.Contains(arn, ":instance-profile/") {
			return "", badParam("IamInstanceProfile.Arn", "Value (%s) is not an instance profile ARN", arn)
		}
		return arn, nil
	case name != "":
		return fmt.Sprintf("arn:aws:iam::%s:instance-profile/%s", f.net.account, name), nil
	}
	return "", nil
}

func (f *Front) parsePlacement(p *params, e *api.EC2Attributes) (string, error) {
	zone := p.str("AvailabilityZone")
	if zone != "" && !slices.Contains(f.net.zones, zone) {
		return "", badParam(p.key("AvailabilityZone"), "Invalid availability zone: [%s]", zone)
	}
	var err error
	pl := &e.Placement
	if pl.Tenancy, err = p.oneOf("Tenancy", "default", "default", "dedicated", "host"); err != nil {
		return "", err
	}
	pl.GroupName = p.str("GroupName")
	if pl.PartitionNumber, err = p.integer("PartitionNumber", 0, 1, 7); err != nil {
		return "", err
	}
	if pl.PartitionNumber > 0 && pl.GroupName == "" {
		return "", errorf(http.StatusBadRequest, "InvalidParameterCombination", "Placement.PartitionNumber needs Placement.GroupName")
	}
	pl.HostID = p.str("HostId")
	if pl.Affinity, err = p.oneOf("Affinity", "", "default", "host"); err != nil {
		return "", err
	}
	if pl.HostID != "" {
		i := slices.IndexFunc(f.net.aws.Hosts, func(h api.AWSDedicatedHost) bool { return h.ID == pl.HostID })
		if i < 0 {
			return "", errorf(http.StatusBadRequest, "InvalidHostID.NotFound", "Placement.HostId: The host ID '%s' does not exist", pl.HostID)
		}
		if zone != "" && zone != f.net.aws.Hosts[i].Zone {
			return "", errorf(http.StatusBadRequest, "InvalidParameterCombination", "Placement.HostId: host %s is in %s, not %s", pl.HostID, f.net.aws.Hosts[i].Zone, zone)
		}
		zone, pl.Tenancy = f.net.aws.Hosts[i].Zone, "host"
	}
	return zone, nil
}

// parseInterfaces reads SubnetId/SecurityGroupId.N/SecurityGroup.N or NetworkInterface.N
// and returns the zone, which the subnets decide.
func (f *Front) parseInterfaces(p *params, e *api.EC2Attributes, zone string, t api.InstanceType) (string, error) {
	top := p.str("SubnetId")
	groups, err := f.parseGroups(p, "SecurityGroupId", "SecurityGroup")
	if err != nil {
		return "", err
	}
	nis := p.members("NetworkInterface")
	if len(nis) > 0 && (top != "" || len(groups) > 0) {
		return "", errorf(http.StatusBadRequest, "InvalidParameterCombination", "Network interfaces and an instance-level subnet ID or security groups may not be specified on the same request")
	}
	if len(nis) == 0 {
		sn, err := f.pickSubnet("SubnetId", top, zone)
		if err != nil {
			return "", err
		}
		e.NetworkInterfaces = []api.EC2NetworkInterface{{SubnetID: sn.ID, InterfaceType: "interface", Groups: groups, SourceDestCheck: true}}
		return sn.Zone, nil
	}
	for _, m := range nis {
		ni := api.EC2NetworkInterface{SourceDestCheck: true}
		if ni.DeviceIndex, err = m.integer("DeviceIndex", len(e.NetworkInterfaces), 0, 31); err != nil {
			return "", err
		}
		if ni.NetworkCardIndex, err = m.integer("NetworkCardIndex", 0, 0, 31); err != nil {
			return "", err
		}
		if ni.InterfaceType, err = m.oneOf("InterfaceType", "interface", "interface", "efa", "efa-only"); err != nil {
			return "", err
		}
		if ni.InterfaceType != "interface" && !t.EFA {
			return "", badParam(m.key("InterfaceType"), "instance type %s does not support EFA", t.Name)
		}
		ni.Description = m.str("Description")
		m.str("DeleteOnTermination")
		if ni.PublicIP, err = m.boolean("AssociatePublicIpAddress", false); err != nil {
			return "", err
		}
		if ni.Groups, err = f.parseGroups(m, "SecurityGroupId", ""); err != nil {
			return "", err
		}
		sn, err := f.pickSubnet(m.key("SubnetId"), m.str("SubnetId"), zone)
		if err != nil {
			return "", err
		}
		zone = sn.Zone // every interface in the first one's zone
		ni.SubnetID = sn.ID
		e.NetworkInterfaces = append(e.NetworkInterfaces, ni)
	}
	slices.SortStableFunc(e.NetworkInterfaces, func(a, b api.EC2NetworkInterface) int { return a.DeviceIndex - b.DeviceIndex })
	if e.NetworkInterfaces[0].DeviceIndex != 0 {
		return "", badParam("NetworkInterface.1.DeviceIndex", "one network interface must have device index 0")
	}
	return zone, nil
}

// pickSubnet resolves a subnet ID, or, without one, the first private subnet of zone (or
// of the region).
func (f *Front) pickSubnet(param, id, zone string) (api.AWSSubnet, error) {
	if id != "" {
		sn, ok := f.net.subnets[id]
		if !ok {
			return sn, errorf(http.StatusBadRequest, "InvalidSubnetID.NotFound", "%s: The subnet ID '%s' does not exist", param, id)
		}
		if zone != "" && sn.Zone != zone {
			return sn, errorf(http.StatusBadRequest, "InvalidParameterCombination", "%s: subnet %s is in %s, not in %s", param, id, sn.Zone, zone)
		}
		return sn, nil
	}
	for _, public := range []bool{false, true} {
		for _, sn := range f.net.aws.Subnets {
			if sn.Public == public && (zone == "" || sn.Zone == zone) {
				return sn, nil
			}
		}
	}
	return api.AWSSubnet{}, errorf(http.StatusBadRequest, "MissingParameter", "%s: no subnet in zone %s; name one", param, zone)
}

// parseGroups resolves security group IDs (idParam.N) and names (nameParam.N).
func (f *Front) parseGroups(p *params, idParam, nameParam string) ([]api.EC2Group, error) {
	var out []api.EC2Group
	for i, id := range p.list(idParam) {
		g, ok := f.net.sgs[id]
		if !ok {
			return nil, errorf(http.StatusBadRequest, "InvalidGroup.NotFound", "%s.%d: The security group '%s' does not exist in VPC '%s'", p.key(idParam), i+1, id, f.net.aws.VPC.ID)
		}
		out = append(out, api.EC2Group{ID: g.ID, Name: g.Name})
	}
	if nameParam == "" {
		return out, nil
	}
	for i, name := range p.list(nameParam) {
		j := slices.IndexFunc(f.net.aws.SecurityGroups, func(g api.AWSSecurityGroup) bool { return g.Name == name })
		if j < 0 {
			return nil, errorf(http.StatusBadRequest, "InvalidGroup.NotFound", "%s.%d: The security group '%s' does not exist", nameParam, i+1, name)
		}
		g := f.net.aws.SecurityGroups[j]
		out = append(out, api.EC2Group{ID: g.ID, Name: g.Name})
	}
	return out, nil
}

var volumeTypes = []string{"gp2", "gp3", "io1", "io2", "st1", "sc1", "standard"}

// parseBlockDevices reads BlockDeviceMapping.N; without a mapping of the root device the
// AMI's root volume (/dev/xvda, 16 GiB gp3) is attached.
func parseBlockDevices(p *params) ([]api.EC2BlockDevice, error) {
	var out []api.EC2BlockDevice
	for _, m := range p.members("BlockDeviceMapping") {
		b := api.EC2BlockDevice{DeleteOnTermination: true}
		var err error
		if b.DeviceName, err = m.required("DeviceName"); err != nil {
			return nil, err
		}
		if m.str("NoDevice") != "" || m.str("VirtualName") != "" {
			continue
		}
		ebs := m.sub("Ebs")
		if b.SizeGiB, err = ebs.integer("VolumeSize", 16, 1, 65536); err != nil {
			return nil, err
		}
		if b.VolumeType, err = ebs.oneOf("VolumeType", "gp3", volumeTypes...); err != nil {
			return nil, err
		}
		if b.IOPS, err = ebs.integer("Iops", 0, 100, 256000); err != nil {
			return nil, err
		}
		if b.Throughput, err = ebs.integer("Throughput", 0, 125, 2000); err != nil {
			return nil, err
		}
		if b.Encrypted, err = ebs.boolean("Encrypted", false); err != nil {
			return nil, err
		}
		if b.DeleteOnTermination, err = ebs.boolean("DeleteOnTermination", true); err != nil {
			return nil, err
		}
		b.KMSKeyID = ebs.str("KmsKeyId")
		if b.KMSKeyID != "" && !b.Encrypted {
			return nil, errorf(http.StatusBadRequest, "InvalidParameterDependency", "%s: a KMS key needs Encrypted=true", ebs.key("KmsKeyId"))
		}
		ebs.str("SnapshotId")
		out = append(out, b)
	}
	if !slices.ContainsFunc(out, func(b api.EC2BlockDevice) bool { return b.DeviceName == imageRootDevice }) {
		out = append([]api.EC2BlockDevice{{DeviceName: imageRootDevice, SizeGiB: imageRootGiB, VolumeType: "gp3", DeleteOnTermination: true}}, out...)
	}
	return out, nil
}

// parseTagSpecs reads TagSpecification.N: tags for the instance, its volumes and its
// network interfaces.
func parseTagSpecs(p *params) (inst, vol, eni map[string]string, err error) {
	for _, m := range p.members("TagSpecification") {
		rt, err := m.oneOf("ResourceType", "", "instance", "volume", "network-interface", "spot-instances-request")
		if err != nil {
			return nil, nil, nil, err
		}
		if rt == "" {
			return nil, nil, nil, errorf(http.StatusBadRequest, "MissingParameter", "The request must contain the parameter %s", m.key("ResourceType"))
		}
		tags, err := m.tags("Tag")
		if err != nil {
			return nil, nil, nil, err
		}
		switch rt {
		case "instance":
			inst = tags
		case "volume":
			vol = tags
		case "network-interface":
			eni = tags
		}
	}
	return inst, vol, eni, nil
}

// parseOptions reads market, capacity reservation, metadata, CPU and DNS name options.
func parseOptions(p *params, e *api.EC2Attributes, t api.InstanceType) error {
	mo := p.sub("InstanceMarketOptions")
	market, err := mo.oneOf("MarketType", "", "spot", "capacity-block")
	if err != nil {
		return err
	}
	if market == "spot" {
		so := mo.sub("SpotOptions")
		e.Spot = &api.EC2Spot{MaxPrice: so.str("MaxPrice")}
		if e.Spot.Type, err = so.oneOf("SpotInstanceType", "one-time", "one-time", "persistent"); err != nil {
			return err
		}
		if e.Spot.InterruptionBehavior, err = so.oneOf("InstanceInterruptionBehavior", "terminate", "terminate", "stop", "hibernate"); err != nil {
			return err
		}
	}
	cr := p.sub("CapacityReservationSpecification")
	if e.CapacityReservation.Preference, err = cr.oneOf("CapacityReservationPreference", "open", "open", "none", "capacity-reservations-only"); err != nil {
		return err
	}
	e.CapacityReservation.ID = cr.str("CapacityReservationTarget.CapacityReservationId")
	if e.CapacityReservation.ID != "" && !strings.HasPrefix(e.CapacityReservation.ID, "cr-") {
		return badParam(cr.key("CapacityReservationTarget.CapacityReservationId"), "Value (%s) is not a capacity reservation ID (cr-…)", e.CapacityReservation.ID)
	}
	md := p.sub("MetadataOptions")
	if err := parseMetadata(md, &e.Metadata); err != nil {
		return err
	}
	if p.has("CpuOptions.CoreCount") || p.has("CpuOptions.ThreadsPerCore") {
		cpu := p.sub("CpuOptions")
		e.CPU = &api.EC2CPUOptions{}
		if e.CPU.CoreCount, err = cpu.integer("CoreCount", t.VCPU/2, 1, t.VCPU); err != nil {
			return err
		}
		if e.CPU.ThreadsPerCore, err = cpu.integer("ThreadsPerCore", 2, 1, 2); err != nil {
			return err
		}
		if e.CPU.CoreCount*e.CPU.ThreadsPerCore > t.VCPU {
			return badParam("CpuOptions.CoreCount", "%d cores × %d threads exceed the %d vCPUs of %s", e.CPU.CoreCount, e.CPU.ThreadsPerCore, t.VCPU, t.Name)
		}
	}
	dns := p.sub("PrivateDnsNameOptions")
	if e.PrivateDNS.HostnameType, err = dns.oneOf("HostnameType", "ip-name", "ip-name", "resource-name"); err != nil {
		return err
	}
	if e.PrivateDNS.ARecord, err = dns.boolean("EnableResourceNameDnsARecord", false); err != nil {
		return err
	}
	e.PrivateDNS.AAAARecord, err = dns.boolean("EnableResourceNameDnsAAAARecord", false)
	return err
}

// parseMetadata reads instance metadata options over their current values (defaults on
// launch: tokens optional, endpoint enabled, hop limit 1).
func parseMetadata(p *params, m *api.EC2MetadataOptions) error {
	def := func(cur, d string) string {
		if cur == "" {
			return d
		}
		return cur
	}
	var err error
	if m.HTTPTokens, err = p.oneOf("HttpTokens", def(m.HTTPTokens, "optional"), "optional", "required"); err != nil {
		return err
	}
	if m.HTTPEndpoint, err = p.oneOf("HttpEndpoint", def(m.HTTPEndpoint, "enabled"), "enabled", "disabled"); err != nil {
		return err
	}
	if m.InstanceMetadataTags, err = p.oneOf("InstanceMetadataTags", def(m.InstanceMetadataTags, "disabled"), "enabled", "disabled"); err != nil {
		return err
	}
	if m.HTTPProtocolIPv6, err = p.oneOf("HttpProtocolIpv6", def(m.HTTPProtocolIPv6, "disabled"), "enabled", "disabled"); err != nil {
		return err
	}
	hop := m.HopLimit
	if hop == 0 {
		hop = 1
	}
	m.HopLimit, err = p.integer("HttpPutResponseHopLimit", hop, 1, 64)
	return err
}
