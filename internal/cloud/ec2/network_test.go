package ec2_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbv2types "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/machina-dev/machina/internal/cloud/api"
)

func filter(name string, values ...string) types.Filter {
	return types.Filter{Name: aws.String(name), Values: values}
}

// TestNetworkModel describes the default network the way an installer-provisioned
// cluster's machine controller finds it: by tag:Name, by IDs and by filters.
func TestNetworkModel(t *testing.T) {
	e := start(t)
	c, cx := e.ec2, ctx(t)

	vpcs, err := c.DescribeVpcs(cx, &awsec2.DescribeVpcsInput{Filters: []types.Filter{filter("tag:Name", infra+"-vpc")}})
	if err != nil || len(vpcs.Vpcs) != 1 || aws.ToString(vpcs.Vpcs[0].VpcId) != vpcID || aws.ToString(vpcs.Vpcs[0].CidrBlock) != "10.0.0.0/16" {
		t.Fatalf("DescribeVpcs: %+v, %v", vpcs, err)
	}
	_, err = c.DescribeVpcs(cx, &awsec2.DescribeVpcsInput{VpcIds: []string{"vpc-0000000000000000f"}})
	wantCode(t, err, "InvalidVpcID.NotFound", "vpc-0000000000000000f")

	subs, err := c.DescribeSubnets(cx, &awsec2.DescribeSubnetsInput{Filters: []types.Filter{
		filter("tag:Name", infra+"-subnet-private-us-east-1a"), filter("vpc-id", vpcID)}})
	if err != nil || len(subs.Subnets) != 1 || aws.ToString(subs.Subnets[0].SubnetId) != privateA ||
		aws.ToString(subs.Subnets[0].AvailabilityZone) != "us-east-1a" || aws.ToString(subs.Subnets[0].AvailabilityZoneId) != "use1-az1" ||
		aws.ToString(subs.Subnets[0].CidrBlock) != "10.0.128.0/20" || aws.ToInt32(subs.Subnets[0].AvailableIpAddressCount) != 4091 {
		t.Fatalf("DescribeSubnets by name: %+v, %v", subs, err)
	}
	all, err := c.DescribeSubnets(cx, &awsec2.DescribeSubnetsInput{Filters: []types.Filter{filter("tag:Name", infra+"-subnet-private-*")}})
	if err != nil || len(all.Subnets) != 3 {
		t.Fatalf("private subnets: %+v, %v", all, err)
	}
	_, err = c.DescribeSubnets(cx, &awsec2.DescribeSubnetsInput{SubnetIds: []string{privateA, "subnet-0000000000000000f"}})
	wantCode(t, err, "InvalidSubnetID.NotFound", "subnet-0000000000000000f")

	sgs, err := c.DescribeSecurityGroups(cx, &awsec2.DescribeSecurityGroupsInput{Filters: []types.Filter{
		filter("tag:Name", infra+"-node", infra+"-lb"), filter("vpc-id", vpcID)}})
	if err != nil || len(sgs.SecurityGroups) != 2 || aws.ToString(sgs.SecurityGroups[0].GroupId) != nodeSG {
		t.Fatalf("DescribeSecurityGroups: %+v, %v", sgs, err)
	}
	_, err = c.DescribeSecurityGroups(cx, &awsec2.DescribeSecurityGroupsInput{GroupIds: []string{"sg-0000000000000000f"}})
	wantCode(t, err, "InvalidGroup.NotFound", "sg-0000000000000000f")

	zones, err := c.DescribeAvailabilityZones(cx, &awsec2.DescribeAvailabilityZonesInput{})
	if err != nil || len(zones.AvailabilityZones) != 3 || aws.ToString(zones.AvailabilityZones[2].ZoneName) != "us-east-1c" ||
		aws.ToString(zones.AvailabilityZones[2].RegionName) != region || zones.AvailabilityZones[2].State != types.AvailabilityZoneStateAvailable {
		t.Fatalf("DescribeAvailabilityZones: %+v, %v", zones, err)
	}

	imgs, err := c.DescribeImages(cx, &awsec2.DescribeImagesInput{Owners: []string{api.RHCOSOwner},
		Filters: []types.Filter{filter("name", "rhcos-9.6*"), filter("architecture", "x86_64")}})
	if err != nil || len(imgs.Images) != 1 || aws.ToString(imgs.Images[0].ImageId) != rhcosAMI || aws.ToString(imgs.Images[0].CreationDate) == "" {
		t.Fatalf("DescribeImages: %+v, %v", imgs, err)
	}
	// The root volume, as CAPA reads it to size an instance's root device.
	if bdm := imgs.Images[0].BlockDeviceMappings; len(bdm) != 1 || aws.ToString(bdm[0].DeviceName) != aws.ToString(imgs.Images[0].RootDeviceName) ||
		bdm[0].Ebs == nil || aws.ToInt32(bdm[0].Ebs.VolumeSize) != 16 || !strings.HasPrefix(aws.ToString(bdm[0].Ebs.SnapshotId), "snap-") {
		t.Errorf("DescribeImages block device mappings: %+v", bdm)
	}
	if none, err := c.DescribeImages(cx, &awsec2.DescribeImagesInput{Owners: []string{"self"}}); err != nil || len(none.Images) != 0 {
		t.Errorf("images owned by self: %+v, %v", none, err)
	}
	_, err = c.DescribeImages(cx, &awsec2.DescribeImagesInput{ImageIds: []string{"ami-0000000000000000f"}})
	wantCode(t, err, "InvalidAMIID.NotFound", "ami-0000000000000000f")

	its, err := c.DescribeInstanceTypes(cx, &awsec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{types.InstanceTypeG4dnXlarge, types.InstanceTypeM6gXlarge}})
	if err != nil || len(its.InstanceTypes) != 2 {
		t.Fatalf("DescribeInstanceTypes: %+v, %v", its, err)
	}
	g4 := its.InstanceTypes[0]
	if aws.ToInt32(g4.VCpuInfo.DefaultVCpus) != 4 || aws.ToInt64(g4.MemoryInfo.SizeInMiB) != 16384 || g4.GpuInfo == nil ||
		aws.ToInt32(g4.GpuInfo.Gpus[0].Count) != 1 || its.InstanceTypes[1].ProcessorInfo.SupportedArchitectures[0] != types.ArchitectureTypeArm64 {
		t.Errorf("instance types = %+v", its.InstanceTypes)
	}
	efa, err := c.DescribeInstanceTypes(cx, &awsec2.DescribeInstanceTypesInput{Filters: []types.Filter{filter("network-info.efa-supported", "true")}})
	if err != nil || len(efa.InstanceTypes) != 1 || efa.InstanceTypes[0].InstanceType != types.InstanceTypeP4d24xlarge {
		t.Errorf("EFA types: %+v, %v", efa, err)
	}
	_, err = c.DescribeInstanceTypes(cx, &awsec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(5)})
	wantCode(t, err, "InvalidParameterValue", "MaxResults")
	_, err = c.DescribeInstanceTypes(cx, &awsec2.DescribeInstanceTypesInput{NextToken: aws.String("x")})
	wantCode(t, err, "InvalidParameterValue", "NextToken")
	_, err = c.DescribeInstanceTypes(cx, &awsec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{"z9.huge"}})
	wantCode(t, err, "InvalidInstanceType", "z9.huge")

	hosts, err := c.DescribeHosts(cx, &awsec2.DescribeHostsInput{})
	if err != nil || len(hosts.Hosts) != 0 {
		t.Errorf("DescribeHosts: %+v, %v", hosts, err)
	}
	_, err = c.DescribeHosts(cx, &awsec2.DescribeHostsInput{HostIds: []string{"h-0000000000000000f"}})
	wantCode(t, err, "InvalidHostID.NotFound", "h-0000000000000000f")
	ltv, err := c.DescribeLaunchTemplateVersions(cx, &awsec2.DescribeLaunchTemplateVersionsInput{})
	if err != nil || len(ltv.LaunchTemplateVersions) != 0 {
		t.Errorf("DescribeLaunchTemplateVersions: %+v, %v", ltv, err)
	}
	_, err = c.DescribeLaunchTemplateVersions(cx, &awsec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateName: aws.String("lt")})
	wantCode(t, err, "InvalidLaunchTemplateName.NotFoundException", "lt")
}

// TestSTSAndLoadBalancers: GetCallerIdentity, and registering an instance with a classic
// load balancer and an ELBv2 target group on their own endpoints.
func TestSTSAndLoadBalancers(t *testing.T) {
	e := start(t)
	id, err := e.sts().GetCallerIdentity(ctx(t), &sts.GetCallerIdentityInput{})
	if err != nil || aws.ToString(id.Account) != api.DefaultAWSAccountID || aws.ToString(id.Arn) != "arn:aws:iam::424242424242:user/machina-lab" {
		t.Fatalf("GetCallerIdentity: %+v, %v", id, err)
	}
	inst := aws.ToString(e.run(runInput(nil))[0].InstanceId)

	classic := e.elb()
	name := infra + "-apiserver"
	reg, err := classic.RegisterInstancesWithLoadBalancer(ctx(t), &elb.RegisterInstancesWithLoadBalancerInput{
		LoadBalancerName: aws.String(name), Instances: []elbtypes.Instance{{InstanceId: aws.String(inst)}}})
	if err != nil || len(reg.Instances) != 1 || aws.ToString(reg.Instances[0].InstanceId) != inst {
		t.Fatalf("RegisterInstancesWithLoadBalancer: %+v, %v", reg, err)
	}
	d, err := classic.DescribeLoadBalancers(ctx(t), &elb.DescribeLoadBalancersInput{LoadBalancerNames: []string{name}})
	if err != nil || len(d.LoadBalancerDescriptions) != 1 || len(d.LoadBalancerDescriptions[0].Instances) != 1 || len(d.LoadBalancerDescriptions[0].Subnets) != 3 {
		t.Fatalf("DescribeLoadBalancers: %+v, %v", d, err)
	}
	dereg, err := classic.DeregisterInstancesFromLoadBalancer(ctx(t), &elb.DeregisterInstancesFromLoadBalancerInput{
		LoadBalancerName: aws.String(name), Instances: []elbtypes.Instance{{InstanceId: aws.String(inst)}}})
	if err != nil || len(dereg.Instances) != 0 {
		t.Fatalf("DeregisterInstancesFromLoadBalancer: %+v, %v", dereg, err)
	}
	_, err = classic.DescribeLoadBalancers(ctx(t), &elb.DescribeLoadBalancersInput{LoadBalancerNames: []string{"nope"}})
	wantCode(t, err, "LoadBalancerNotFound", "nope")

	v2 := e.elbv2()
	lbs, err := v2.DescribeLoadBalancers(ctx(t), &elbv2.DescribeLoadBalancersInput{Names: []string{infra + "-int"}})
	if err != nil || len(lbs.LoadBalancers) != 1 || lbs.LoadBalancers[0].Scheme != elbv2types.LoadBalancerSchemeEnumInternal {
		t.Fatalf("DescribeLoadBalancers v2: %+v, %v", lbs, err)
	}
	tgs, err := v2.DescribeTargetGroups(ctx(t), &elbv2.DescribeTargetGroupsInput{LoadBalancerArn: lbs.LoadBalancers[0].LoadBalancerArn})
	if err != nil || len(tgs.TargetGroups) != 2 || aws.ToString(tgs.TargetGroups[0].TargetGroupName) != infra+"-aint" {
		t.Fatalf("DescribeTargetGroups: %+v, %v", tgs, err)
	}
	tg := tgs.TargetGroups[0].TargetGroupArn
	if _, err := v2.RegisterTargets(ctx(t), &elbv2.RegisterTargetsInput{TargetGroupArn: tg,
		Targets: []elbv2types.TargetDescription{{Id: aws.String(inst)}}}); err != nil {
		t.Fatal(err)
	}
	h, err := v2.DescribeTargetHealth(ctx(t), &elbv2.DescribeTargetHealthInput{TargetGroupArn: tg})
	if err != nil || len(h.TargetHealthDescriptions) != 1 || h.TargetHealthDescriptions[0].TargetHealth.State != elbv2types.TargetHealthStateEnumHealthy ||
		aws.ToInt32(h.TargetHealthDescriptions[0].Target.Port) != 6443 {
		t.Fatalf("DescribeTargetHealth: %+v, %v", h, err)
	}
	if _, err := v2.DeregisterTargets(ctx(t), &elbv2.DeregisterTargetsInput{TargetGroupArn: tg,
		Targets: []elbv2types.TargetDescription{{Id: aws.String(inst)}}}); err != nil {
		t.Fatal(err)
	}
	if h, err := v2.DescribeTargetHealth(ctx(t), &elbv2.DescribeTargetHealthInput{TargetGroupArn: tg}); err != nil || len(h.TargetHealthDescriptions) != 0 {
		t.Errorf("after deregistering: %+v, %v", h, err)
	}
	_, err = v2.RegisterTargets(ctx(t), &elbv2.RegisterTargetsInput{TargetGroupArn: tg, Targets: []elbv2types.TargetDescription{{Id: aws.String("i-0000000000000000f")}}})
	wantCode(t, err, "InvalidTarget", "i-0000000000000000f")
	_, err = v2.DescribeTargetHealth(ctx(t), &elbv2.DescribeTargetHealthInput{TargetGroupArn: aws.String("arn:aws:elasticloadbalancing:us-east-1:1:targetgroup/x/1")})
	wantCode(t, err, "TargetGroupNotFound", "TargetGroupArn")
}

// TestDHCPOptions: the VPC's DHCP options set, as CAPA looks it up to learn the VPC's domain
// name (DescribeVpcs, then DescribeDhcpOptions of its dhcpOptionsId), is AWS's default one.
func TestDHCPOptions(t *testing.T) {
	e := start(t)
	c, cx := e.ec2, ctx(t)

	vpcs, err := c.DescribeVpcs(cx, &awsec2.DescribeVpcsInput{VpcIds: []string{vpcID}})
	if err != nil || len(vpcs.Vpcs) != 1 || aws.ToString(vpcs.Vpcs[0].DhcpOptionsId) == "" {
		t.Fatalf("DescribeVpcs: %+v, %v", vpcs, err)
	}
	id := aws.ToString(vpcs.Vpcs[0].DhcpOptionsId)
	out, err := c.DescribeDhcpOptions(cx, &awsec2.DescribeDhcpOptionsInput{DhcpOptionsIds: []string{id}})
	if err != nil || len(out.DhcpOptions) != 1 || aws.ToString(out.DhcpOptions[0].DhcpOptionsId) != id {
		t.Fatalf("DescribeDhcpOptions %s: %+v, %v", id, out, err)
	}
	got := map[string]string{}
	for _, cfg := range out.DhcpOptions[0].DhcpConfigurations {
		if len(cfg.Values) != 1 {
			t.Fatalf("DHCP configuration %s has values %+v, want one", aws.ToString(cfg.Key), cfg.Values)
		}
		got[aws.ToString(cfg.Key)] = aws.ToString(cfg.Values[0].Value)
	}
	if got["domain-name"] != "ec2.internal" || got["domain-name-servers"] != "AmazonProvidedDNS" {
		t.Errorf("DHCP configurations %v, want us-east-1's default (ec2.internal, AmazonProvidedDNS)", got)
	}

	byKey, err := c.DescribeDhcpOptions(cx, &awsec2.DescribeDhcpOptionsInput{Filters: []types.Filter{filter("key", "domain-name")}})
	if err != nil || len(byKey.DhcpOptions) != 1 {
		t.Errorf("DescribeDhcpOptions key=domain-name: %+v, %v", byKey, err)
	}
	none, err := c.DescribeDhcpOptions(cx, &awsec2.DescribeDhcpOptionsInput{Filters: []types.Filter{filter("value", "example.com")}})
	if err != nil || len(none.DhcpOptions) != 0 {
		t.Errorf("DescribeDhcpOptions value=example.com: %+v, %v", none, err)
	}
	_, err = c.DescribeDhcpOptions(cx, &awsec2.DescribeDhcpOptionsInput{DhcpOptionsIds: []string{"dopt-0000000000000000f"}})
	wantCode(t, err, "InvalidDhcpOptionID.NotFound", "dopt-0000000000000000f")
}
