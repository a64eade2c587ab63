package ec2_test

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/cloudtest"
	"github.com/machina-dev/machina/internal/cloud/server"
)

// TestRunInstancesEveryParameter launches with every RunInstances parameter a machine
// controller sets and reads each back through DescribeInstances, the JSON API and the
// volume/interface describes.
func TestRunInstancesEveryParameter(t *testing.T) {
	e := start(t)
	userData := []byte("#!/bin/sh\necho hello\n")
	in := &awsec2.RunInstancesInput{
		ImageId: aws.String(rhcosAMI), InstanceType: types.InstanceTypeM6i2xlarge,
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1), ClientToken: aws.String("every-parameter"),
		SubnetId: aws.String(privateB), SecurityGroupIds: []string{nodeSG}, SecurityGroups: []string{infra + "-lb"},
		KeyName:            aws.String("lab-key"),
		UserData:           aws.String(base64.StdEncoding.EncodeToString(userData)),
		IamInstanceProfile: &types.IamInstanceProfileSpecification{Name: aws.String(infra + "-worker-profile")},
		Placement:          &types.Placement{AvailabilityZone: aws.String("us-east-1b"), Tenancy: types.TenancyDedicated, GroupName: aws.String("pg-1"), PartitionNumber: aws.Int32(3)},
		BlockDeviceMappings: []types.BlockDeviceMapping{{DeviceName: aws.String("/dev/xvda"), Ebs: &types.EbsBlockDevice{
			VolumeSize: aws.Int32(120), VolumeType: types.VolumeTypeGp3, Iops: aws.Int32(4000), Throughput: aws.Int32(250),
			Encrypted: aws.Bool(true), KmsKeyId: aws.String("arn:aws:kms:us-east-1:424242424242:key/abcd"), DeleteOnTermination: aws.Bool(true)}},
			{DeviceName: aws.String("/dev/xvdb"), Ebs: &types.EbsBlockDevice{VolumeSize: aws.Int32(50), VolumeType: types.VolumeTypeIo1, Iops: aws.Int32(1000)}}},
		InstanceMarketOptions: &types.InstanceMarketOptionsRequest{MarketType: types.MarketTypeSpot,
			SpotOptions: &types.SpotMarketOptions{MaxPrice: aws.String("0.42")}},
		CapacityReservationSpecification: &types.CapacityReservationSpecification{CapacityReservationPreference: types.CapacityReservationPreferenceNone},
		MetadataOptions: &types.InstanceMetadataOptionsRequest{HttpTokens: types.HttpTokensStateRequired,
			HttpPutResponseHopLimit: aws.Int32(2), HttpEndpoint: types.InstanceMetadataEndpointStateEnabled, InstanceMetadataTags: types.InstanceMetadataTagsStateEnabled},
		CpuOptions:            &types.CpuOptionsRequest{CoreCount: aws.Int32(4), ThreadsPerCore: aws.Int32(1)},
		PrivateDnsNameOptions: &types.PrivateDnsNameOptionsRequest{HostnameType: types.HostnameTypeResourceName, EnableResourceNameDnsARecord: aws.Bool(true)},
		EbsOptimized:          aws.Bool(true),
		TagSpecifications: []types.TagSpecification{
			{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{{Key: aws.String("Name"), Value: aws.String("worker-0")}, {Key: aws.String("kubernetes.io/cluster/" + infra), Value: aws.String("owned")}}},
			{ResourceType: types.ResourceTypeVolume, Tags: []types.Tag{{Key: aws.String("Name"), Value: aws.String("worker-0-vol")}}},
			{ResourceType: types.ResourceTypeNetworkInterface, Tags: []types.Tag{{Key: aws.String("Name"), Value: aws.String("worker-0-eni")}}},
		},
	}
	got := e.run(in)
	if len(got) != 1 {
		t.Fatalf("%d instances", len(got))
	}
	id := aws.ToString(got[0].InstanceId)
	i := e.describe(id)
	check := func(what string, ok bool) {
		t.Helper()
		if !ok {
			t.Errorf("%s wrong in %+v", what, i)
		}
	}
	check("state", i.State.Name == types.InstanceStateNameRunning && aws.ToInt32(i.State.Code) == 16)
	check("placement", aws.ToString(i.Placement.AvailabilityZone) == "us-east-1b" && i.Placement.Tenancy == types.TenancyDedicated &&
		aws.ToString(i.Placement.GroupName) == "pg-1" && aws.ToInt32(i.Placement.PartitionNumber) == 3)
	check("network", aws.ToString(i.SubnetId) == privateB && aws.ToString(i.VpcId) == vpcID &&
		strings.HasPrefix(aws.ToString(i.PrivateIpAddress), "10.0.144."))
	check("groups", len(i.SecurityGroups) == 2 && aws.ToString(i.SecurityGroups[0].GroupId) == nodeSG && aws.ToString(i.SecurityGroups[1].GroupName) == infra+"-lb")
	check("dns name", aws.ToString(i.PrivateDnsName) == id+".ec2.internal" && i.PrivateDnsNameOptions.HostnameType == types.HostnameTypeResourceName &&
		aws.ToBool(i.PrivateDnsNameOptions.EnableResourceNameDnsARecord))
	check("key, profile, token", aws.ToString(i.KeyName) == "lab-key" && aws.ToString(i.ClientToken) == "every-parameter" &&
		aws.ToString(i.IamInstanceProfile.Arn) == "arn:aws:iam::424242424242:instance-profile/"+infra+"-worker-profile")
	check("spot", i.InstanceLifecycle == types.InstanceLifecycleTypeSpot && strings.HasPrefix(aws.ToString(i.SpotInstanceRequestId), "sir-"))
	check("capacity reservation", i.CapacityReservationSpecification.CapacityReservationPreference == types.CapacityReservationPreferenceNone)
	check("metadata", i.MetadataOptions.HttpTokens == types.HttpTokensStateRequired && aws.ToInt32(i.MetadataOptions.HttpPutResponseHopLimit) == 2 &&
		i.MetadataOptions.InstanceMetadataTags == types.InstanceMetadataTagsStateEnabled)
	check("cpu", aws.ToInt32(i.CpuOptions.CoreCount) == 4 && aws.ToInt32(i.CpuOptions.ThreadsPerCore) == 1)
	check("ebs optimized, arch", aws.ToBool(i.EbsOptimized) && i.Architecture == types.ArchitectureValuesX8664)
	check("tags", tagMap(i.Tags)["Name"] == "worker-0")
	check("block devices", len(i.BlockDeviceMappings) == 2 && aws.ToString(i.BlockDeviceMappings[0].DeviceName) == "/dev/xvda" &&
		strings.HasPrefix(aws.ToString(i.BlockDeviceMappings[0].Ebs.VolumeId), "vol-"))
	check("interfaces", len(i.NetworkInterfaces) == 1 && aws.ToString(i.NetworkInterfaces[0].PrivateIpAddress) == aws.ToString(i.PrivateIpAddress))

	vols, err := e.ec2.DescribeVolumes(ctx(t), &awsec2.DescribeVolumesInput{Filters: []types.Filter{{Name: aws.String("attachment.instance-id"), Values: []string{id}}}})
	if err != nil || len(vols.Volumes) != 2 {
		t.Fatalf("DescribeVolumes: %+v, %v", vols, err)
	}
	root := vols.Volumes[0]
	if aws.ToInt32(root.Size) != 120 || !aws.ToBool(root.Encrypted) || aws.ToString(root.KmsKeyId) != "arn:aws:kms:us-east-1:424242424242:key/abcd" ||
		aws.ToInt32(root.Iops) != 4000 || tagMap(root.Tags)["Name"] != "worker-0-vol" || vols.Volumes[1].VolumeType != types.VolumeTypeIo1 {
		t.Errorf("volumes = %+v", vols.Volumes)
	}
	enis, err := e.ec2.DescribeNetworkInterfaces(ctx(t), &awsec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{{Name: aws.String("attachment.instance-id"), Values: []string{id}}}})
	if err != nil || len(enis.NetworkInterfaces) != 1 || tagMap(enis.NetworkInterfaces[0].TagSet)["Name"] != "worker-0-eni" ||
		aws.ToString(enis.NetworkInterfaces[0].Attachment.InstanceId) != id {
		t.Fatalf("DescribeNetworkInterfaces: %+v, %v", enis, err)
	}

	// One model: the JSON API sees the same instance, with its user data and EC2 attributes.
	l, err := e.cloud.Client.DescribeInstances(ctx(t), api.DescribeInstancesRequest{InstanceIDs: []string{id}, IncludeUserData: true})
	if err != nil || len(l) != 1 {
		t.Fatalf("JSON DescribeInstances: %v, %v", l, err)
	}
	if l[0].ProviderID != "aws:///us-east-1b/"+id || string(l[0].UserData) != string(userData) || l[0].EC2 == nil || l[0].EC2.KeyName != "lab-key" {
		t.Errorf("JSON view = %+v", l[0])
	}
}

// TestEFAInterfaces launches with EFA interfaces on a type that supports them and is
// refused, naming the parameter, on one that does not.
func TestEFAInterfaces(t *testing.T) {
	e := start(t)
	in := runInput(nil)
	in.InstanceType, in.SubnetId, in.SecurityGroupIds = types.InstanceTypeP4d24xlarge, nil, nil
	in.NetworkInterfaces = []types.InstanceNetworkInterfaceSpecification{
		{DeviceIndex: aws.Int32(0), SubnetId: aws.String(privateA), InterfaceType: aws.String("efa"), Groups: []string{nodeSG}},
		{DeviceIndex: aws.Int32(1), NetworkCardIndex: aws.Int32(1), SubnetId: aws.String(privateA), InterfaceType: aws.String("efa-only"), Groups: []string{nodeSG}},
	}
	i := e.run(in)[0]
	if len(i.NetworkInterfaces) != 2 || aws.ToString(i.NetworkInterfaces[0].InterfaceType) != "efa" ||
		aws.ToString(i.NetworkInterfaces[1].InterfaceType) != "efa-only" || aws.ToInt32(i.NetworkInterfaces[1].Attachment.NetworkCardIndex) != 1 ||
		aws.ToString(i.NetworkInterfaces[0].PrivateIpAddress) == aws.ToString(i.NetworkInterfaces[1].PrivateIpAddress) {
		t.Errorf("interfaces = %+v", i.NetworkInterfaces)
	}
	in = runInput(nil)
	in.SubnetId, in.SecurityGroupIds = nil, nil
	in.NetworkInterfaces = []types.InstanceNetworkInterfaceSpecification{{DeviceIndex: aws.Int32(0), SubnetId: aws.String(privateA), InterfaceType: aws.String("efa")}}
	_, err := e.ec2.RunInstances(ctx(t), in)
	wantCode(t, err, "InvalidParameterValue", "NetworkInterface.1.InterfaceType", "EFA")
}

// TestIdempotentRunInstances: the same token returns the same reservation (also for
// MaxCount > 1), another request under it is IdempotentParameterMismatch, and nothing
// launches twice.
func TestIdempotentRunInstances(t *testing.T) {
	e := start(t)
	in := runInput(map[string]string{"k": "v"})
	in.MinCount, in.MaxCount = aws.Int32(2), aws.Int32(3)
	first := e.run(in)
	second := e.run(in)
	ids := func(l []types.Instance) []string {
		var out []string
		for _, i := range l {
			out = append(out, aws.ToString(i.InstanceId))
		}
		return out
	}
	if len(first) != 3 || !slices.Equal(ids(first), ids(second)) {
		t.Fatalf("first %v, second %v", ids(first), ids(second))
	}
	for k, i := range first {
		if aws.ToInt32(i.AmiLaunchIndex) != int32(k) {
			t.Errorf("launch index of %d = %d", k, aws.ToInt32(i.AmiLaunchIndex))
		}
	}
	out, err := e.ec2.DescribeInstances(ctx(t), &awsec2.DescribeInstancesInput{InstanceIds: ids(first)})
	if err != nil || len(out.Reservations) != 1 || len(out.Reservations[0].Instances) != 3 {
		t.Fatalf("one reservation of three expected: %+v, %v", out, err)
	}
	in.InstanceType = types.InstanceTypeM6iLarge
	_, err = e.ec2.RunInstances(ctx(t), in)
	wantCode(t, err, "IdempotentParameterMismatch", aws.ToString(in.ClientToken))
	st, err := e.cloud.Client.Stats(ctx(t))
	if err != nil || st.InstancesCreated != 3 {
		t.Errorf("instances created = %+v, %v; want 3", st, err)
	}
}

// TestDescribeFiltersAndPagination checks the filters a controller uses and that the
// SDK's paginator walks every page exactly once.
func TestDescribeFiltersAndPagination(t *testing.T) {
	e := start(t)
	for k := range 7 {
		in := runInput(map[string]string{"cluster": "pages", "n": string(rune('a' + k))})
		if k == 6 {
			in.SubnetId = aws.String(privateB)
		}
		e.run(in)
	}
	other := e.run(runInput(map[string]string{"cluster": "other"}))[0]
	if _, err := e.ec2.TerminateInstances(ctx(t), &awsec2.TerminateInstancesInput{InstanceIds: []string{aws.ToString(other.InstanceId)}}); err != nil {
		t.Fatal(err)
	}
	count := func(fs ...types.Filter) int {
		t.Helper()
		p := awsec2.NewDescribeInstancesPaginator(e.ec2, &awsec2.DescribeInstancesInput{Filters: fs, MaxResults: aws.Int32(5)})
		seen, pages := map[string]bool{}, 0
		for p.HasMorePages() {
			out, err := p.NextPage(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			pages++
			for _, r := range out.Reservations {
				for _, i := range r.Instances {
					if seen[aws.ToString(i.InstanceId)] {
						t.Errorf("%s on two pages", aws.ToString(i.InstanceId))
					}
					seen[aws.ToString(i.InstanceId)] = true
				}
			}
		}
		if len(seen) > 5 && pages < 2 {
			t.Errorf("%d instances on %d page(s) of at most 5", len(seen), pages)
		}
		return len(seen)
	}
	f := func(name string, values ...string) types.Filter {
		return types.Filter{Name: aws.String(name), Values: values}
	}
	for _, c := range []struct {
		name string
		fs   []types.Filter
		want int
	}{
		{"tag", []types.Filter{f("tag:cluster", "pages")}, 7},
		{"tag wildcard", []types.Filter{f("tag:cluster", "pa*")}, 7},
		{"tag-key", []types.Filter{f("tag-key", "n")}, 7},
		{"state", []types.Filter{f("instance-state-name", "running")}, 7},
		{"states", []types.Filter{f("instance-state-name", "running", "terminated")}, 8},
		{"vpc", []types.Filter{f("vpc-id", vpcID), f("tag:cluster", "pages")}, 7},
		{"subnet", []types.Filter{f("subnet-id", privateB)}, 1},
		{"and", []types.Filter{f("tag:n", "a", "b"), f("instance-state-name", "running")}, 2},
		{"none", []types.Filter{f("tag:cluster", "nope")}, 0},
	} {
		if got := count(c.fs...); got != c.want {
			t.Errorf("%s: %d instances, want %d", c.name, got, c.want)
		}
	}
	_, err := e.ec2.DescribeInstances(ctx(t), &awsec2.DescribeInstancesInput{Filters: []types.Filter{f("flavour", "x")}})
	wantCode(t, err, "InvalidParameterValue", "flavour")
	_, err = e.ec2.DescribeInstances(ctx(t), &awsec2.DescribeInstancesInput{InstanceIds: []string{"i-0123456789abcdef0"}})
	wantCode(t, err, "InvalidInstanceID.NotFound", "i-0123456789abcdef0")
	_, err = e.ec2.DescribeInstances(ctx(t), &awsec2.DescribeInstancesInput{NextToken: aws.String("bogus")})
	wantCode(t, err, "InvalidParameterValue", "NextToken")
}

// TestLifecycleAndTags terminates, stops and starts instances and changes the tags of
// instances, volumes and interfaces.
func TestLifecycleAndTags(t *testing.T) {
	e := start(t, cloudtest.WithDelays(server.Delays{}))
	a := aws.ToString(e.run(runInput(nil))[0].InstanceId)
	b := aws.ToString(e.run(runInput(nil))[0].InstanceId)

	stop, err := e.ec2.StopInstances(ctx(t), &awsec2.StopInstancesInput{InstanceIds: []string{a}})
	if err != nil || stop.StoppingInstances[0].CurrentState.Name != types.InstanceStateNameStopped ||
		stop.StoppingInstances[0].PreviousState.Name != types.InstanceStateNameRunning {
		t.Fatalf("StopInstances: %+v, %v", stop, err)
	}
	if st := e.describe(a).State.Name; st != types.InstanceStateNameStopped {
		t.Errorf("after stop: %s", st)
	}
	startOut, err := e.ec2.StartInstances(ctx(t), &awsec2.StartInstancesInput{InstanceIds: []string{a}})
	if err != nil || startOut.StartingInstances[0].CurrentState.Name != types.InstanceStateNameRunning {
		t.Fatalf("StartInstances: %+v, %v", startOut, err)
	}

	vol := aws.ToString(e.describe(a).BlockDeviceMappings[0].Ebs.VolumeId)
	eni := aws.ToString(e.describe(a).NetworkInterfaces[0].NetworkInterfaceId)
	tag := func(k, v string) types.Tag { return types.Tag{Key: aws.String(k), Value: aws.String(v)} }
	if _, err := e.ec2.CreateTags(ctx(t), &awsec2.CreateTagsInput{Resources: []string{a, b, vol, eni},
		Tags: []types.Tag{tag("role", "worker"), tag("keep", "1")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ec2.DeleteTags(ctx(t), &awsec2.DeleteTagsInput{Resources: []string{a, vol},
		Tags: []types.Tag{{Key: aws.String("role")}, tag("keep", "other-value")}}); err != nil {
		t.Fatal(err)
	}
	if got := tagMap(e.describe(a).Tags); got["role"] != "" || got["keep"] != "1" {
		t.Errorf("tags of a = %v", got)
	}
	if got := tagMap(e.describe(b).Tags); got["role"] != "worker" {
		t.Errorf("tags of b = %v", got)
	}
	vols, err := e.ec2.DescribeVolumes(ctx(t), &awsec2.DescribeVolumesInput{VolumeIds: []string{vol}})
	if err != nil || tagMap(vols.Volumes[0].Tags)["keep"] != "1" || tagMap(vols.Volumes[0].Tags)["role"] != "" {
		t.Errorf("volume tags: %+v, %v", vols, err)
	}
	enis, err := e.ec2.DescribeNetworkInterfaces(ctx(t), &awsec2.DescribeNetworkInterfacesInput{
		Filters: []types.Filter{{Name: aws.String("tag:role"), Values: []string{"worker"}}}})
	if err != nil || len(enis.NetworkInterfaces) != 1 || aws.ToString(enis.NetworkInterfaces[0].NetworkInterfaceId) != eni {
		t.Errorf("interfaces by tag: %+v, %v", enis, err)
	}
	_, err = e.ec2.CreateTags(ctx(t), &awsec2.CreateTagsInput{Resources: []string{vpcID}, Tags: []types.Tag{tag("x", "y")}})
	wantCode(t, err, "InvalidParameterValue", "ResourceId.1", vpcID)
	_, err = e.ec2.CreateTags(ctx(t), &awsec2.CreateTagsInput{Resources: []string{"i-0000000000000000f"}, Tags: []types.Tag{tag("x", "y")}})
	wantCode(t, err, "InvalidInstanceID.NotFound", "i-0000000000000000f")

	term, err := e.ec2.TerminateInstances(ctx(t), &awsec2.TerminateInstancesInput{InstanceIds: []string{a, b}})
	if err != nil || len(term.TerminatingInstances) != 2 || term.TerminatingInstances[0].CurrentState.Name != types.InstanceStateNameTerminated {
		t.Fatalf("TerminateInstances: %+v, %v", term, err)
	}
	_, err = e.ec2.StartInstances(ctx(t), &awsec2.StartInstancesInput{InstanceIds: []string{a}})
	wantCode(t, err, "IncorrectInstanceState", a)
	if i := e.describe(a); aws.ToString(i.StateReason.Code) != api.ReasonUserInitiated || aws.ToString(i.PrivateDnsName) != "" {
		t.Errorf("terminated instance: %+v", i)
	}
}

// TestModifyAttributes changes an interface's groups and an instance's metadata options.
func TestModifyAttributes(t *testing.T) {
	e := start(t)
	i := e.run(runInput(nil))[0]
	id, eni := aws.ToString(i.InstanceId), aws.ToString(i.NetworkInterfaces[0].NetworkInterfaceId)
	cp := "sg-01a2b3c4d5e6f7082"
	if _, err := e.ec2.ModifyNetworkInterfaceAttribute(ctx(t), &awsec2.ModifyNetworkInterfaceAttributeInput{
		NetworkInterfaceId: aws.String(eni), Groups: []string{nodeSG, cp}, SourceDestCheck: &types.AttributeBooleanValue{Value: aws.Bool(false)}}); err != nil {
		t.Fatal(err)
	}
	got := e.describe(id)
	if len(got.SecurityGroups) != 2 || aws.ToString(got.SecurityGroups[1].GroupId) != cp || aws.ToBool(got.SourceDestCheck) {
		t.Errorf("after modify: groups %+v, sourceDestCheck %v", got.SecurityGroups, aws.ToBool(got.SourceDestCheck))
	}
	_, err := e.ec2.ModifyNetworkInterfaceAttribute(ctx(t), &awsec2.ModifyNetworkInterfaceAttributeInput{
		NetworkInterfaceId: aws.String(eni), Groups: []string{"sg-0000000000000000f"}})
	wantCode(t, err, "InvalidGroup.NotFound", "sg-0000000000000000f")

	out, err := e.ec2.ModifyInstanceMetadataOptions(ctx(t), &awsec2.ModifyInstanceMetadataOptionsInput{
		InstanceId: aws.String(id), HttpTokens: types.HttpTokensStateRequired, HttpPutResponseHopLimit: aws.Int32(3)})
	if err != nil || out.InstanceMetadataOptions.HttpTokens != types.HttpTokensStateRequired || aws.ToInt32(out.InstanceMetadataOptions.HttpPutResponseHopLimit) != 3 {
		t.Fatalf("ModifyInstanceMetadataOptions: %+v, %v", out, err)
	}
	if m := e.describe(id).MetadataOptions; m.HttpTokens != types.HttpTokensStateRequired || m.HttpEndpoint != types.InstanceMetadataEndpointStateEnabled {
		t.Errorf("metadata options = %+v", m)
	}
	_, err = e.ec2.ModifyInstanceMetadataOptions(ctx(t), &awsec2.ModifyInstanceMetadataOptionsInput{
		InstanceId: aws.String(id), HttpPutResponseHopLimit: aws.Int32(99)})
	wantCode(t, err, "InvalidParameterValue", "HttpPutResponseHopLimit")
}

// TestSDKWaiters: the SDK's waiters see pending → running and shutting-down → terminated.
func TestSDKWaiters(t *testing.T) {
	e := start(t, cloudtest.WithDelays(server.Delays{Pending: 300 * time.Millisecond, ShuttingDown: 300 * time.Millisecond}))
	i := e.run(runInput(nil))[0]
	if i.State.Name != types.InstanceStateNamePending {
		t.Errorf("a new instance is %s, want pending", i.State.Name)
	}
	ids := []string{aws.ToString(i.InstanceId)}
	fast := func(o *awsec2.InstanceRunningWaiterOptions) {
		o.MinDelay, o.MaxDelay = 50*time.Millisecond, 100*time.Millisecond
	}
	if err := awsec2.NewInstanceRunningWaiter(e.ec2, fast).Wait(ctx(t), &awsec2.DescribeInstancesInput{InstanceIds: ids}, 20*time.Second); err != nil {
		t.Fatalf("waiting for running: %v", err)
	}
	term, err := e.ec2.TerminateInstances(ctx(t), &awsec2.TerminateInstancesInput{InstanceIds: ids})
	if err != nil || term.TerminatingInstances[0].CurrentState.Name != types.InstanceStateNameShuttingDown {
		t.Fatalf("TerminateInstances: %+v, %v", term, err)
	}
	fastT := func(o *awsec2.InstanceTerminatedWaiterOptions) {
		o.MinDelay, o.MaxDelay = 50*time.Millisecond, 100*time.Millisecond
	}
	if err := awsec2.NewInstanceTerminatedWaiter(e.ec2, fastT).Wait(ctx(t), &awsec2.DescribeInstancesInput{InstanceIds: ids}, 20*time.Second); err != nil {
		t.Fatalf("waiting for terminated: %v", err)
	}
}
