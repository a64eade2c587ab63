package api

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// AWSNetwork is the network the EC2 front (internal/cloud/ec2) serves: one region, one VPC
// with subnets per zone, security groups and load balancers, as an installer-provisioned
// OpenShift cluster has them. It is part of the catalogue (Catalogue.AWS) and as fixed as
// the rest of it: clients describe it and launch into it, they do not create or delete it.
type AWSNetwork struct {
	// Region is the region the EC2 endpoint serves; it must be a region of the catalogue.
	Region string `json:"region"`
	// AccountID is the owner of every resource, and the account GetCallerIdentity reports.
	AccountID string `json:"accountID"`
	// InfraID is the cluster's infrastructure name; it only names the defaults.
	InfraID        string             `json:"infraID,omitempty"`
	VPC            AWSVPC             `json:"vpc"`
	Subnets        []AWSSubnet        `json:"subnets"`
	SecurityGroups []AWSSecurityGroup `json:"securityGroups,omitempty"`
	LoadBalancers  []AWSLoadBalancer  `json:"loadBalancers,omitempty"`
	TargetGroups   []AWSTargetGroup   `json:"targetGroups,omitempty"`
	Hosts          []AWSDedicatedHost `json:"hosts,omitempty"`
}

// AWSVPC is the catalogue's VPC.
type AWSVPC struct {
	ID   string            `json:"id"`
	CIDR string            `json:"cidr"`
	Tags map[string]string `json:"tags,omitempty"`
}

// AWSSubnet is a subnet of the VPC in one zone. Instances launched into it get their
// addresses from CIDR (never reused, as for networks).
type AWSSubnet struct {
	ID     string            `json:"id"`
	Zone   string            `json:"zone"`
	CIDR   string            `json:"cidr"`
	Public bool              `json:"public,omitempty"`
	Tags   map[string]string `json:"tags,omitempty"`
}

// AWSSecurityGroup is a security group of the VPC.
type AWSSecurityGroup struct {
	ID          string            `json:"id"`
	Name        string            `json:"name"`
	Description string            `json:"description,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
}

// AWSLoadBalancer is a classic load balancer (Type "classic") or a network load balancer
// of ELBv2 (Type "network"); instances are registered with the former directly and with
// the latter through its target groups.
type AWSLoadBalancer struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Scheme string `json:"scheme,omitempty"` // internal or internet-facing
}

// AWSTargetGroup is an ELBv2 target group of instances, attached to LoadBalancer.
type AWSTargetGroup struct {
	Name         string `json:"name"`
	LoadBalancer string `json:"loadBalancer"`
	Port         int    `json:"port"`
}

// AWSDedicatedHost is a dedicated host instances may be placed on (Placement.HostId).
type AWSDedicatedHost struct {
	ID           string `json:"id"`
	Zone         string `json:"zone"`
	InstanceType string `json:"instanceType"`
}

// EC2Attributes are what an instance launched through the EC2 front carries beyond the
// common instance record: everything RunInstances was told and DescribeInstances returns.
type EC2Attributes struct {
	ClientToken         string                 `json:"clientToken,omitempty"`
	ReservationID       string                 `json:"reservationID"`
	LaunchIndex         int                    `json:"launchIndex,omitempty"`
	VPCID               string                 `json:"vpcID"`
	SubnetID            string                 `json:"subnetID"`
	KeyName             string                 `json:"keyName,omitempty"`
	IAMInstanceProfile  string                 `json:"iamInstanceProfile,omitempty"`
	NetworkInterfaces   []EC2NetworkInterface  `json:"networkInterfaces"`
	BlockDevices        []EC2BlockDevice       `json:"blockDevices"`
	Placement           EC2Placement           `json:"placement"`
	Spot                *EC2Spot               `json:"spot,omitempty"`
	CapacityReservation EC2CapacityReservation `json:"capacityReservation"`
	Metadata            EC2MetadataOptions     `json:"metadata"`
	CPU                 *EC2CPUOptions         `json:"cpu,omitempty"`
	PrivateDNS          EC2PrivateDNSOptions   `json:"privateDNS"`
	EBSOptimized        bool                   `json:"ebsOptimized,omitempty"`
	Monitoring          bool                   `json:"monitoring,omitempty"`
	// LoadBalancers are the classic load balancers, TargetGroups the ELBv2 target groups
	// (by name) the instance is registered with.
	LoadBalancers []string `json:"loadBalancers,omitempty"`
	TargetGroups  []string `json:"targetGroups,omitempty"`
}

// EC2Group names a security group.
type EC2Group struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// EC2NetworkInterface is a network interface of an instance; the first (device index 0)
// carries the instance's private address.
type EC2NetworkInterface struct {
	ID               string            `json:"id"`
	DeviceIndex      int               `json:"deviceIndex"`
	NetworkCardIndex int               `json:"networkCardIndex,omitempty"`
	InterfaceType    string            `json:"interfaceType"` // interface, efa, efa-only
	SubnetID         string            `json:"subnetID"`
	PrivateIP        string            `json:"privateIP"`
	Groups           []EC2Group        `json:"groups,omitempty"`
	Description      string            `json:"description,omitempty"`
	SourceDestCheck  bool              `json:"sourceDestCheck"`
	Tags             map[string]string `json:"tags,omitempty"`
	// PublicIP is set when the interface was launched with AssociatePublicIpAddress; the
	// EC2 front derives its public address from the interface ID.
	PublicIP bool `json:"publicIP,omitempty"`
}

// EC2BlockDevice is an EBS volume attached to an instance.
type EC2BlockDevice struct {
	DeviceName          string            `json:"deviceName"`
	VolumeID            string            `json:"volumeID"`
	SizeGiB             int               `json:"sizeGiB"`
	VolumeType          string            `json:"volumeType"`
	IOPS                int               `json:"iops,omitempty"`
	Throughput          int               `json:"throughput,omitempty"`
	Encrypted           bool              `json:"encrypted,omitempty"`
	KMSKeyID            string            `json:"kmsKeyID,omitempty"`
	DeleteOnTermination bool              `json:"deleteOnTermination"`
	Tags                map[string]string `json:"tags,omitempty"`
}

// EC2Placement is where an instance runs beyond its zone.
type EC2Placement struct {
	Tenancy         string `json:"tenancy"`
	GroupName       string `json:"groupName,omitempty"`
	PartitionNumber int    `json:"partitionNumber,omitempty"`
	HostID          string `json:"hostID,omitempty"`
	Affinity        string `json:"affinity,omitempty"`
}

// EC2Spot marks a spot instance.
type EC2Spot struct {
	RequestID            string `json:"requestID"`
	MaxPrice             string `json:"maxPrice,omitempty"`
	Type                 string `json:"type,omitempty"`
	InterruptionBehavior string `json:"interruptionBehavior,omitempty"`
}

// EC2CapacityReservation is the capacity reservation preference or target.
type EC2CapacityReservation struct {
	Preference string `json:"preference,omitempty"`
	ID         string `json:"id,omitempty"`
}

// EC2MetadataOptions are the instance metadata service options.
type EC2MetadataOptions struct {
	HTTPTokens           string `json:"httpTokens"`
	HTTPEndpoint         string `json:"httpEndpoint"`
	HopLimit             int    `json:"hopLimit"`
	InstanceMetadataTags string `json:"instanceMetadataTags"`
	HTTPProtocolIPv6     string `json:"httpProtocolIPv6"`
}

// EC2CPUOptions are the requested cores and threads per core.
type EC2CPUOptions struct {
	CoreCount      int `json:"coreCount"`
	ThreadsPerCore int `json:"threadsPerCore"`
}

// EC2PrivateDNSOptions choose the instance's private host name.
type EC2PrivateDNSOptions struct {
	HostnameType string `json:"hostnameType"` // ip-name or resource-name
	ARecord      bool   `json:"aRecord,omitempty"`
	AAAARecord   bool   `json:"aaaaRecord,omitempty"`
}

// AWSProviderIDPrefix starts the provider ID of an instance launched through the EC2 front:
// aws:///<zone>/<instance-id>, the form the AWS cloud provider gives Nodes.
const AWSProviderIDPrefix = "aws:///"

// FormatAWSProviderID returns aws:///<zone>/<instance-id>.
func FormatAWSProviderID(zone, instanceID string) string {
	return AWSProviderIDPrefix + zone + "/" + instanceID
}

// EC2Hostname is the private DNS name of an EC2 instance: ip-a-b-c-d.ec2.internal in
// us-east-1 and ip-a-b-c-d.<region>.compute.internal elsewhere, or, with the hostname
// type resource-name, <instance-id>.<region>.compute.internal (as EC2 names them).
func EC2Hostname(region, instanceID, ip, hostnameType string) string {
	domain := region + ".compute.internal"
	if region == "us-east-1" {
		domain = "ec2.internal"
	}
	if hostnameType == "resource-name" {
		return instanceID + "." + domain
	}
	return "ip-" + strings.ReplaceAll(ip, ".", "-") + "." + domain
}

// DerivedID returns a stable resource ID (prefix + 17 hex digits) derived from an
// instance ID, e.g. its volumes and network interfaces: vol-…, eni-…
func DerivedID(prefix, instanceID string, index int) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%s/%d", prefix, instanceID, index)))
	return prefix + "-" + hex.EncodeToString(sum[:])[:17]
}

// Clone returns a deep copy of e (nil for nil).
func (e *EC2Attributes) Clone() *EC2Attributes {
	if e == nil {
		return nil
	}
	out := *e
	out.NetworkInterfaces = slices.Clone(e.NetworkInterfaces)
	for k := range out.NetworkInterfaces {
		n := &out.NetworkInterfaces[k]
		n.Groups, n.Tags = slices.Clone(n.Groups), maps.Clone(n.Tags)
	}
	out.BlockDevices = slices.Clone(e.BlockDevices)
	for k := range out.BlockDevices {
		out.BlockDevices[k].Tags = maps.Clone(out.BlockDevices[k].Tags)
	}
	if e.Spot != nil {
		s := *e.Spot
		out.Spot = &s
	}
	if e.CPU != nil {
		c := *e.CPU
		out.CPU = &c
	}
	out.LoadBalancers, out.TargetGroups = slices.Clone(e.LoadBalancers), slices.Clone(e.TargetGroups)
	return &out
}
