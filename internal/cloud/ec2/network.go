package ec2

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/machina-dev/machina/internal/cloud/api"
)

// network indexes the catalogue as EC2 shows it. It is immutable.
type network struct {
	region, account string
	aws             *api.AWSNetwork
	zones           []string
	subnets         map[string]api.AWSSubnet
	sgs             map[string]api.AWSSecurityGroup
	images          map[string]api.Image // only ami-… images
	types           map[string]api.InstanceType
}

func newNetwork(cat api.Catalogue) *network {
	n := &network{region: cat.AWS.Region, account: cat.AWS.AccountID, aws: cat.AWS,
		subnets: map[string]api.AWSSubnet{}, sgs: map[string]api.AWSSecurityGroup{},
		images: map[string]api.Image{}, types: map[string]api.InstanceType{}}
	for _, r := range cat.Regions {
		if r.Name == n.region {
			n.zones = r.Zones
		}
	}
	for _, s := range cat.AWS.Subnets {
		n.subnets[s.ID] = s
	}
	for _, g := range cat.AWS.SecurityGroups {
		n.sgs[g.ID] = g
	}
	for _, im := range cat.Images {
		if strings.HasPrefix(im.ImageID, "ami-") {
			n.images[im.ImageID] = im
		}
	}
	for _, t := range cat.InstanceTypes {
		n.types[t.Name] = t
	}
	return n
}

// zoneID is the zone's ID as EC2 shows it: us-east-1a → use1-az1.
func (n *network) zoneID(zone string) string {
	parts := strings.Split(n.region, "-")
	short := n.region
	if len(parts) == 3 && parts[1] != "" {
		short = parts[0] + parts[1][:1] + parts[2]
	}
	return fmt.Sprintf("%s-az%d", short, slices.Index(n.zones, zone)+1)
}

// notFound fails with code naming the first of ids that exists returns false for.
func notFound(ids []string, exists func(string) bool, code, what string) error {
	for _, id := range ids {
		if !exists(id) {
			return errorf(http.StatusBadRequest, code, "The %s '%s' does not exist", what, id)
		}
	}
	return nil
}

type xVPC struct {
	VPCID           string `xml:"vpcId"`
	OwnerID         string `xml:"ownerId"`
	State           string `xml:"state"`
	CIDRBlock       string `xml:"cidrBlock"`
	DHCPOptionsID   string `xml:"dhcpOptionsId"`
	InstanceTenancy string `xml:"instanceTenancy"`
	IsDefault       bool   `xml:"isDefault"`
	Tags            []xTag `xml:"tagSet>item"`
}

type describeVpcsResult struct {
	head
	Vpcs []xVPC `xml:"vpcSet>item"`
}

func (f *Front) describeVpcs(c *call) (any, error) {
	vpc := f.net.aws.VPC
	req, err := f.describe(c, describeSpec{ids: "VpcId",
		filters: []string{"vpc-id", "cidr", "cidr-block-association.cidr-block", "state", "is-default", "owner-id"},
		check:   exist(func(id string) bool { return id == vpc.ID }, "InvalidVpcID.NotFound", "vpc ID")})
	if err != nil {
		return nil, err
	}
	out := &describeVpcsResult{Vpcs: []xVPC{}}
	get := func(name string) []string {
		switch name {
		case "vpc-id":
			return []string{vpc.ID}
		case "cidr", "cidr-block-association.cidr-block":
			return []string{vpc.CIDR}
		case "state":
			return []string{"available"}
		case "is-default":
			return []string{"false"}
		case "owner-id":
			return []string{f.net.account}
		}
		return nil
	}
	if matches(req.filters, vpc.Tags, get) {
		out.Vpcs = append(out.Vpcs, xVPC{VPCID: vpc.ID, OwnerID: f.net.account, State: "available", CIDRBlock: vpc.CIDR,
			DHCPOptionsID: "dopt-" + strings.TrimPrefix(vpc.ID, "vpc-"), InstanceTenancy: "default", Tags: xTags(vpc.Tags)})
	}
	return out, nil
}

type xSubnet struct {
	SubnetID                string `xml:"subnetId"`
	SubnetARN               string `xml:"subnetArn"`
	State                   string `xml:"state"`
	OwnerID                 string `xml:"ownerId"`
	VPCID                   string `xml:"vpcId"`
	CIDRBlock               string `xml:"cidrBlock"`
	AvailableIPAddressCount int    `xml:"availableIpAddressCount"`
	AvailabilityZone        string `xml:"availabilityZone"`
	AvailabilityZoneID      string `xml:"availabilityZoneId"`
	DefaultForAz            bool   `xml:"defaultForAz"`
	MapPublicIPOnLaunch     bool   `xml:"mapPublicIpOnLaunch"`
	HostnameType            string `xml:"privateDnsNameOptionsOnLaunch>hostnameType"`
	Tags                    []xTag `xml:"tagSet>item"`
}

type describeSubnetsResult struct {
	head
	Subnets []xSubnet `xml:"subnetSet>item"`
}

func (f *Front) describeSubnets(c *call) (any, error) {
	req, err := f.describe(c, describeSpec{ids: "SubnetId",
		filters: []string{"subnet-id", "vpc-id", "availability-zone", "availability-zone-id", "cidr-block", "cidr",
			"state", "default-for-az", "map-public-ip-on-launch", "owner-id"},
		check: exist(func(id string) bool { _, ok := f.net.subnets[id]; return ok }, "InvalidSubnetID.NotFound", "subnet ID")})
	if err != nil {
		return nil, err
	}
	ids := req.ids
	out := &describeSubnetsResult{Subnets: []xSubnet{}}
	for _, s := range f.net.aws.Subnets {
		if len(ids) > 0 && !slices.Contains(ids, s.ID) {
			continue
		}
		get := func(name string) []string {
			switch name {
			case "subnet-id":
				return []string{s.ID}
			case "vpc-id":
				return []string{f.net.aws.VPC.ID}
			case "availability-zone":
				return []string{s.Zone}
			case "availability-zone-id":
				return []string{f.net.zoneID(s.Zone)}
			case "cidr-block", "cidr":
				return []string{s.CIDR}
			case "state":
				return []string{"available"}
			case "default-for-az":
				return []string{"false"}
			case "map-public-ip-on-launch":
				return []string{strconv.FormatBool(s.Public)}
			case "owner-id":
				return []string{f.net.account}
			}
			return nil
		}
		if !matches(req.filters, s.Tags, get) {
			continue
		}
		p := netip.MustParsePrefix(s.CIDR)
		out.Subnets = append(out.Subnets, xSubnet{SubnetID: s.ID, State: "available", OwnerID: f.net.account,
			SubnetARN: fmt.Sprintf("arn:aws:ec2:%s:%s:subnet/%s", f.net.region, f.net.account, s.ID),
			VPCID:     f.net.aws.VPC.ID, CIDRBlock: s.CIDR, AvailableIPAddressCount: 1<<(32-p.Bits()) - 5,
			AvailabilityZone: s.Zone, AvailabilityZoneID: f.net.zoneID(s.Zone), MapPublicIPOnLaunch: s.Public,
			HostnameType: "ip-name", Tags: xTags(s.Tags)})
	}
	return out, nil
}

type xIPPermission struct {
	IPProtocol string   `xml:"ipProtocol"`
	CIDRs      []string `xml:"ipRanges>item>cidrIp"`
}

type xSecurityGroup struct {
	OwnerID          string          `xml:"ownerId"`
	GroupID          string          `xml:"groupId"`
	GroupName        string          `xml:"groupName"`
	GroupDescription string          `xml:"groupDescription"`
	VPCID            string          `xml:"vpcId"`
	IPPermissions    []xIPPermission `xml:"ipPermissions>item"`
	IPPermissionsOut []xIPPermission `xml:"ipPermissionsEgress>item"`
	Tags             []xTag          `xml:"tagSet>item"`
}

type describeSecurityGroupsResult struct {
	head
	Groups []xSecurityGroup `xml:"securityGroupInfo>item"`
}

func (f *Front) describeSecurityGroups(c *call) (any, error) {
	names := c.p.list("GroupName")
	byName := func(n string) bool {
		return slices.ContainsFunc(f.net.aws.SecurityGroups, func(g api.AWSSecurityGroup) bool { return g.Name == n })
	}
	req, err := f.describe(c, describeSpec{ids: "GroupId",
		filters: []string{"group-id", "group-name", "vpc-id", "description", "owner-id"},
		check: func(ids []string) error {
			if err := notFound(ids, func(id string) bool { _, ok := f.net.sgs[id]; return ok }, "InvalidGroup.NotFound", "security group"); err != nil {
				return err
			}
			return notFound(names, byName, "InvalidGroup.NotFound", "security group")
		}})
	if err != nil {
		return nil, err
	}
	ids := req.ids
	out := &describeSecurityGroupsResult{Groups: []xSecurityGroup{}}
	for _, g := range f.net.aws.SecurityGroups {
		if len(ids) > 0 && !slices.Contains(ids, g.ID) || len(names) > 0 && !slices.Contains(names, g.Name) {
			continue
		}
		get := func(name string) []string {
			switch name {
			case "group-id":
				return []string{g.ID}
			case "group-name":
				return []string{g.Name}
			case "vpc-id":
				return []string{f.net.aws.VPC.ID}
			case "description":
				return []string{g.Description}
			case "owner-id":
				return []string{f.net.account}
			}
			return nil
		}
		if matches(req.filters, g.Tags, get) {
			out.Groups = append(out.Groups, xSecurityGroup{OwnerID: f.net.account, GroupID: g.ID, GroupName: g.Name,
				GroupDescription: g.Description, VPCID: f.net.aws.VPC.ID,
				IPPermissionsOut: []xIPPermission{{IPProtocol: "-1", CIDRs: []string{"0.0.0.0/0"}}}, Tags: xTags(g.Tags)})
		}
	}
	return out, nil
}

type xZone struct {
	ZoneName           string `xml:"zoneName"`
	ZoneID             string `xml:"zoneId"`
	ZoneState          string `xml:"zoneState"`
	RegionName         string `xml:"regionName"`
	ZoneType           string `xml:"zoneType"`
	OptInStatus        string `xml:"optInStatus"`
	GroupName          string `xml:"groupName"`
	NetworkBorderGroup string `xml:"networkBorderGroup"`
}

type describeZonesResult struct {
	head
	Zones []xZone `xml:"availabilityZoneInfo>item"`
}

func (f *Front) describeAvailabilityZones(c *call) (any, error) {
	zids := c.p.list("ZoneId")
	if _, err := c.p.boolean("AllAvailabilityZones", false); err != nil {
		return nil, err
	}
	req, err := f.describe(c, describeSpec{ids: "ZoneName",
		filters: []string{"zone-name", "zone-id", "region-name", "state", "zone-type", "group-name", "opt-in-status"},
		check:   exist(func(z string) bool { return slices.Contains(f.net.zones, z) }, "InvalidParameterValue", "zone")})
	if err != nil {
		return nil, err
	}
	names := req.ids
	out := &describeZonesResult{Zones: []xZone{}}
	for _, z := range f.net.zones {
		x := xZone{ZoneName: z, ZoneID: f.net.zoneID(z), ZoneState: "available", RegionName: f.net.region,
			ZoneType: "availability-zone", OptInStatus: "opt-in-not-required", GroupName: f.net.region, NetworkBorderGroup: f.net.region}
		if len(names) > 0 && !slices.Contains(names, z) || len(zids) > 0 && !slices.Contains(zids, x.ZoneID) {
			continue
		}
		get := func(name string) []string {
			return map[string][]string{"zone-name": {z}, "zone-id": {x.ZoneID}, "region-name": {f.net.region},
				"state": {"available"}, "zone-type": {x.ZoneType}, "group-name": {f.net.region}, "opt-in-status": {x.OptInStatus}}[name]
		}
		if matches(req.filters, nil, get) {
			out.Zones = append(out.Zones, x)
		}
	}
	return out, nil
}

// ec2Arch is EC2's name of an architecture.
func ec2Arch(a string) string {
	if a == "arm64" {
		return "arm64"
	}
	return "x86_64"
}

type xDHCPOptions struct {
	DHCPOptionsID  string               `xml:"dhcpOptionsId"`
	OwnerID        string               `xml:"ownerId"`
	Configurations []xDHCPConfiguration `xml:"dhcpConfigurationSet>item"`
	Tags           []xTag               `xml:"tagSet>item"`
}

type xDHCPConfiguration struct {
	Key    string   `xml:"key"`
	Values []string `xml:"valueSet>item>value"`
}

type describeDHCPOptionsResult struct {
	head
	Options []xDHCPOptions `xml:"dhcpOptionsSet>item"`
}

// describeDHCPOptions answers for the VPC's one options set, AWS's default for the region:
// Amazon-provided DNS and the region's internal domain name (ec2.internal in us-east-1).
func (f *Front) describeDHCPOptions(c *call) (any, error) {
	id := "dopt-" + strings.TrimPrefix(f.net.aws.VPC.ID, "vpc-")
	domain := f.net.region + ".compute.internal"
	if f.net.region == "us-east-1" {
		domain = "ec2.internal"
	}
	req, err := f.describe(c, describeSpec{ids: "DhcpOptionsId", maxPage: 1000,
		filters: []string{"dhcp-options-id", "key", "value", "owner-id"},
		check:   exist(func(got string) bool { return got == id }, "InvalidDhcpOptionID.NotFound", "DHCP options")})
	if err != nil {
		return nil, err
	}
	opts := xDHCPOptions{DHCPOptionsID: id, OwnerID: f.net.account, Tags: []xTag{}, Configurations: []xDHCPConfiguration{
		{Key: "domain-name", Values: []string{domain}},
		{Key: "domain-name-servers", Values: []string{"AmazonProvidedDNS"}},
	}}
	get := func(name string) []string {
		return map[string][]string{"dhcp-options-id": {id}, "owner-id": {f.net.account},
			"key": {"domain-name", "domain-name-servers"}, "value": {domain, "AmazonProvidedDNS"}}[name]
	}
	out := &describeDHCPOptionsResult{Options: []xDHCPOptions{}}
	if matches(req.filters, nil, get) {
		out.Options = append(out.Options, opts)
	}
	return out, nil
}
