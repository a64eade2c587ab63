package awsactuator

import (
	"encoding/base64"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/utils/ptr"
)

// Tags the actuator puts on every instance (and its volumes and interfaces) besides the
// providerSpec's own.
const (
	// TagMachineUID finds the instance of a Machine whose provider ID was never stored.
	TagMachineUID = "machina.dev/machine-uid"
	// TagMachine names the Machine as <namespace>/<name>, for people.
	TagMachine = "machina.dev/machine"
	// TagName is the EC2 console's name of the instance: the Machine's name.
	TagName = "Name"
	// ClusterTagPrefix + infrastructure name = "owned" marks the cluster's resources.
	ClusterTagPrefix = "kubernetes.io/cluster/"
)

// defaultRootDevice is the root device name when the AMI does not say.
const defaultRootDevice = "/dev/xvda"

// launchInput builds the RunInstances request of a Machine. Its ClientToken is the
// Machine's UID, so any number of attempts launches at most one instance.
func launchInput(m *machinev1beta1.Machine, ps *machinev1beta1.AWSMachineProviderConfig, cl cluster, r *resolved, userData []byte) *ec2.RunInstancesInput {
	in := &ec2.RunInstancesInput{
		ClientToken:  aws.String(string(m.UID)),
		ImageId:      aws.String(r.ami),
		InstanceType: ec2types.InstanceType(ps.InstanceType),
		MinCount:     aws.Int32(1),
		MaxCount:     aws.Int32(1),
		KeyName:      ps.KeyName,
		Placement:    placement(ps),
	}
	if len(userData) > 0 {
		in.UserData = aws.String(base64.StdEncoding.EncodeToString(userData))
	}
	ni := ec2types.InstanceNetworkInterfaceSpecification{
		DeviceIndex:              aws.Int32(int32(ps.DeviceIndex)), // validated to 0..31
		DeleteOnTermination:      aws.Bool(true),
		Groups:                   r.groups,
		AssociatePublicIpAddress: ps.PublicIP,
	}
	if r.subnet != "" {
		ni.SubnetId = aws.String(r.subnet)
	}
	if ps.NetworkInterfaceType == machinev1beta1.AWSEFANetworkInterfaceType {
		ni.InterfaceType = aws.String("efa")
	}
	in.NetworkInterfaces = []ec2types.InstanceNetworkInterfaceSpecification{ni}
	if ref := ps.IAMInstanceProfile; ref != nil {
		switch {
		case ref.ARN != nil:
			in.IamInstanceProfile = &ec2types.IamInstanceProfileSpecification{Arn: ref.ARN}
		case ref.ID != nil:
			in.IamInstanceProfile = &ec2types.IamInstanceProfileSpecification{Name: ref.ID}
		}
	}
	in.BlockDeviceMappings = blockDevices(ps.BlockDevices, r.rootDevice)
	in.TagSpecifications = tagSpecs(instanceTags(m, ps, cl))
	in.InstanceMarketOptions = marketOptions(ps)
	if ps.CapacityReservationID != "" {
		in.CapacityReservationSpecification = &ec2types.CapacityReservationSpecification{
			CapacityReservationTarget: &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(ps.CapacityReservationID)}}
	}
	switch ps.MetadataServiceOptions.Authentication {
	case machinev1beta1.MetadataServiceAuthenticationRequired:
		in.MetadataOptions = &ec2types.InstanceMetadataOptionsRequest{HttpTokens: ec2types.HttpTokensStateRequired,
			HttpEndpoint: ec2types.InstanceMetadataEndpointStateEnabled}
	case machinev1beta1.MetadataServiceAuthenticationOptional:
		in.MetadataOptions = &ec2types.InstanceMetadataOptionsRequest{HttpTokens: ec2types.HttpTokensStateOptional,
			HttpEndpoint: ec2types.InstanceMetadataEndpointStateEnabled}
	}
	if cc := ps.CPUOptions; cc != nil && ptr.Deref(cc.ConfidentialCompute, "") == machinev1beta1.AWSConfidentialComputePolicySEVSNP {
		in.CpuOptions = &ec2types.CpuOptionsRequest{AmdSevSnp: ec2types.AmdSevSnpSpecificationEnabled}
	}
	return in
}

func placement(ps *machinev1beta1.AWSMachineProviderConfig) *ec2types.Placement {
	p := &ec2types.Placement{}
	set := false
	if z := ps.Placement.AvailabilityZone; z != "" {
		p.AvailabilityZone, set = aws.String(z), true
	}
	if t := ps.Placement.Tenancy; t != "" {
		p.Tenancy, set = ec2types.Tenancy(t), true
	}
	if ps.PlacementGroupName != "" {
		p.GroupName, set = aws.String(ps.PlacementGroupName), true
		p.PartitionNumber = ps.PlacementGroupPartition
	}
	if h := ps.Placement.Host; h != nil {
		if h.DedicatedHost != nil && h.DedicatedHost.ID != "" {
			p.HostId, p.Tenancy, set = aws.String(h.DedicatedHost.ID), ec2types.TenancyHost, true
		}
		switch ptr.Deref(h.Affinity, "") {
		case machinev1beta1.HostAffinityDedicatedHost:
			p.Affinity, set = aws.String("host"), true
		case machinev1beta1.HostAffinityAnyAvailable:
			p.Affinity, set = aws.String("default"), true
		}
	}
	if !set {
		return nil
	}
	return p
}

// blockDevices maps the providerSpec's volumes; the one without a device name is the
// AMI's root device.
func blockDevices(devs []machinev1beta1.BlockDeviceMappingSpec, rootDevice string) []ec2types.BlockDeviceMapping {
	if rootDevice == "" {
		rootDevice = defaultRootDevice
	}
	out := make([]ec2types.BlockDeviceMapping, 0, len(devs))
	for _, d := range devs {
		bm := ec2types.BlockDeviceMapping{DeviceName: d.DeviceName, NoDevice: d.NoDevice, VirtualName: d.VirtualName}
		if bm.DeviceName == nil {
			bm.DeviceName = aws.String(rootDevice)
		}
		if e := d.EBS; e != nil {
			ebs := &ec2types.EbsBlockDevice{DeleteOnTermination: aws.Bool(true), Encrypted: e.Encrypted,
				VolumeType: ec2types.VolumeType(ptr.Deref(e.VolumeType, "")), Throughput: e.ThroughputMib}
			if e.VolumeSize != nil {
				ebs.VolumeSize = aws.Int32(int32(*e.VolumeSize)) // validated to 1..65536
			}
			if e.Iops != nil && *e.Iops != 0 {
				ebs.Iops = aws.Int32(int32(*e.Iops)) // EC2 refuses what is out of range
			}
			if id := kmsKeyID(e.KMSKey); id != "" {
				ebs.KmsKeyId = aws.String(id)
			}
			bm.Ebs = ebs
		}
		out = append(out, bm)
	}
	return out
}

// instanceTags are the Infrastructure's resource tags, the providerSpec's tags, then the
// cluster-owned tag, Name and machina's own (which win).
func instanceTags(m *machinev1beta1.Machine, ps *machinev1beta1.AWSMachineProviderConfig, cl cluster) map[string]string {
	tags := maps.Clone(cl.tags)
	if tags == nil {
		tags = map[string]string{}
	}
	for _, t := range ps.Tags {
		tags[t.Name] = t.Value
	}
	tags[ClusterTagPrefix+cl.infraName] = "owned"
	tags[TagName] = m.Name
	tags[TagMachine] = m.Namespace + "/" + m.Name
	tags[TagMachineUID] = string(m.UID)
	return tags
}

// tagSpecs tags the instance, its volumes and its network interfaces alike.
func tagSpecs(tags map[string]string) []ec2types.TagSpecification {
	l := make([]ec2types.Tag, 0, len(tags))
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		l = append(l, ec2types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	var out []ec2types.TagSpecification
	for _, rt := range []ec2types.ResourceType{ec2types.ResourceTypeInstance, ec2types.ResourceTypeVolume, ec2types.ResourceTypeNetworkInterface} {
		out = append(out, ec2types.TagSpecification{ResourceType: rt, Tags: l})
	}
	return out
}

func marketOptions(ps *machinev1beta1.AWSMachineProviderConfig) *ec2types.InstanceMarketOptionsRequest {
	switch {
	case spot(ps):
		so := &ec2types.SpotMarketOptions{SpotInstanceType: ec2types.SpotInstanceTypeOneTime,
			InstanceInterruptionBehavior: ec2types.InstanceInterruptionBehaviorTerminate}
		if o := ps.SpotMarketOptions; o != nil && ptr.Deref(o.MaxPrice, "") != "" {
			so.MaxPrice = o.MaxPrice
		}
		return &ec2types.InstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeSpot, SpotOptions: so}
	case ps.MarketType == machinev1beta1.MarketTypeCapacityBlock:
		return &ec2types.InstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeCapacityBlock}
	}
	return nil
}
