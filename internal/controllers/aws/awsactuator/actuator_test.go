package awsactuator_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/controllers/aws/awsactuator"
	"github.com/machina-dev/machina/internal/controllers/aws/awsclient"
	"github.com/machina-dev/machina/internal/controllers/machineapi/machine"
)

const kmsKey = "arn:aws:kms:us-east-1:424242424242:key/1234abcd-12ab-34cd-56ef-1234567890ab"

// featureCase is one Machine: its providerSpec (the demo worker's, edited) and what EC2
// must report about its instance once it runs.
type featureCase struct {
	name   string
	labels map[string]string
	edit   func(*machinev1beta1.AWSMachineProviderConfig)
	check  func(t *testing.T, f *fixture, m *machinev1beta1.Machine, inst ec2types.Instance)
}

// TestAWSActuator drives Machines with AWSMachineProviderConfigs through the simulated
// cloud's EC2 front, in one lab: every providerSpec feature (checked against what EC2
// reports through aws-sdk-go-v2), invalid configurations, faults, an instance terminated
// behind the controller's back, deletion, and a manager crash between RunInstances and
// the Machine's write.
func TestAWSActuator(t *testing.T) {
	f := start(t)
	t.Run("parallel", func(t *testing.T) {
		for _, c := range featureCases(t, f) {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				m := f.machine(t, c.name, c.labels, c.edit)
				m, inst := f.running(t, m)
				checkCommon(t, f, m, inst)
				c.check(t, f, m, inst)
				deleteTerminates(t, f, m, aws.ToString(inst.InstanceId))
			})
		}
		for _, c := range invalidCases() {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				m := f.failed(t, f.machine(t, c.name, nil, c.edit), c.parts...)
				if n := len(f.instances(t, m)); n != 0 {
					t.Errorf("%d instances launched for an invalid Machine", n)
				}
			})
		}
		t.Run("ami-arn", func(t *testing.T) {
			t.Parallel()
			// Admission refuses it before any controller sees it (TestProviderSpecInvalid
			// covers the actuator's own refusal, for Machines stored before the policy).
			_, err := f.create(f.env.Client, "ami-arn", nil, func(ps *machinev1beta1.AWSMachineProviderConfig) {
				ps.AMI = machinev1beta1.AWSResourceReference{ARN: aws.String("arn:aws:ec2:us-east-1::image/ami-0a8f3c6e2b1d94f57")}
			}, t)
			if err == nil || !strings.Contains(err.Error(), "spec.providerSpec.value.ami.arn") {
				t.Errorf("creating a Machine with ami.arn: %v, want a refusal naming spec.providerSpec.value.ami.arn", err)
			}
		})
		t.Run("throttled", func(t *testing.T) { t.Parallel(); testThrottled(t, f) })
		t.Run("capacity", func(t *testing.T) { t.Parallel(); testCapacity(t, f) })
		t.Run("bad-credentials", func(t *testing.T) { t.Parallel(); testBadCredentials(t, f) })
		t.Run("terminated-behind-our-back", func(t *testing.T) { t.Parallel(); testTerminatedOutside(t, f) })
		t.Run("load-balancers", func(t *testing.T) { t.Parallel(); testLoadBalancers(t, f) })
		t.Run("machineset-born-with-finalizer", func(t *testing.T) { t.Parallel(); testMachineSetBornWithFinalizer(t, f) })
	})
	t.Run("crash-mid-create", func(t *testing.T) { testCrashMidCreate(t, f) })
}

// checkCommon checks what every Machine gets: provider ID, addresses, labels, the
// instance-state annotation and providerStatus, the cluster tags and the client token.
func checkCommon(t *testing.T, f *fixture, m *machinev1beta1.Machine, inst ec2types.Instance) {
	id, zone := aws.ToString(inst.InstanceId), aws.ToString(inst.Placement.AvailabilityZone)
	if want := "aws:///" + zone + "/" + id; ptr.Deref(m.Spec.ProviderID, "") != want {
		t.Errorf("providerID %q, want %q", ptr.Deref(m.Spec.ProviderID, ""), want)
	}
	if !slices.Contains(m.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: aws.ToString(inst.PrivateIpAddress)}) ||
		!slices.Contains(m.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalDNS, Address: aws.ToString(inst.PrivateDnsName)}) {
		t.Errorf("addresses %v, instance %s / %s", m.Status.Addresses, aws.ToString(inst.PrivateIpAddress), aws.ToString(inst.PrivateDnsName))
	}
	if m.Labels[awsactuator.LabelInstanceType] != string(inst.InstanceType) || m.Labels[awsactuator.LabelRegion] != "us-east-1" ||
		m.Labels[awsactuator.LabelZone] != zone || m.Annotations[machine.InstanceStateAnnotation] != "running" {
		t.Errorf("labels %v, annotations %v", m.Labels, m.Annotations)
	}
	st, err := awsactuator.ProviderStatus(m)
	if err != nil || st == nil || aws.ToString(st.InstanceID) != id || ptr.Deref(st.InstanceState, "") != "running" {
		t.Errorf("providerStatus %+v, %v", st, err)
	}
	tags := tagMap(inst.Tags)
	if tags["kubernetes.io/cluster/"+f.cluster.Name] != "owned" || tags["Name"] != m.Name || tags[awsactuator.TagMachineUID] != string(m.UID) {
		t.Errorf("tags %v", tags)
	}
	if aws.ToString(inst.ClientToken) != string(m.UID) {
		t.Errorf("client token %q, want the Machine UID %s", aws.ToString(inst.ClientToken), m.UID)
	}
}

// deleteTerminates deletes the Machine and checks that its instance, and only that one,
// is terminated.
func deleteTerminates(t *testing.T, f *fixture, m *machinev1beta1.Machine, id string) {
	f.deleted(t, m)
	l := f.instances(t, m)
	if len(l) != 1 {
		t.Errorf("%d instances for the Machine, want 1", len(l))
	}
	for _, i := range l {
		if i.InstanceID != id || (i.State != api.StateShuttingDown && i.State != api.StateTerminated) {
			t.Errorf("after deletion: instance %s is %s (the Machine's was %s)", i.InstanceID, i.State, id)
		}
	}
}

func featureCases(t *testing.T, f *fixture) []featureCase {
	sg := func(name string) machinev1beta1.AWSResourceReference {
		return machinev1beta1.AWSResourceReference{Filters: []machinev1beta1.Filter{{Name: "tag:Name", Values: []string{name}}}}
	}
	infra := f.cluster.Name
	publicB, controlPlaneSG := f.idByName(t, "subnet", infra+"-subnet-public-us-east-1b"), f.idByName(t, "sg", infra+"-controlplane")
	return []featureCase{
		{name: "worker-defaults", // the installer's worker: AMI id, subnet and groups by filters, profile, user data, credentials
			check: func(t *testing.T, f *fixture, m *machinev1beta1.Machine, inst ec2types.Instance) {
				want := []string{f.idByName(t, "sg", infra+"-lb"), f.idByName(t, "sg", infra+"-node")}
				slices.Sort(want)
				if aws.ToString(inst.ImageId) != f.cluster.AMI || aws.ToString(inst.SubnetId) != f.idByName(t, "subnet", infra+"-subnet-private-us-east-1a") ||
					!slices.Equal(groupIDs(inst), want) || inst.InstanceType != "m6i.xlarge" {
					t.Errorf("image %s subnet %s groups %v type %s", aws.ToString(inst.ImageId), aws.ToString(inst.SubnetId), groupIDs(inst), inst.InstanceType)
				}
				if inst.IamInstanceProfile == nil || !strings.HasSuffix(aws.ToString(inst.IamInstanceProfile.Arn), ":instance-profile/"+infra+"-worker-profile") {
					t.Errorf("instance profile %+v", inst.IamInstanceProfile)
				}
				root := f.volumes(t, aws.ToString(inst.InstanceId))["/dev/xvda"]
				if aws.ToInt32(root.Size) != 120 || root.VolumeType != ec2types.VolumeTypeGp3 || !aws.ToBool(root.Encrypted) {
					t.Errorf("root volume %+v", root)
				}
				if inst.MetadataOptions == nil || inst.MetadataOptions.HttpTokens != ec2types.HttpTokensStateOptional {
					t.Errorf("metadata options %+v", inst.MetadataOptions)
				}
				if ni := inst.NetworkInterfaces; len(ni) != 1 || aws.ToString(ni[0].InterfaceType) != "interface" || inst.PublicIpAddress != nil {
					t.Errorf("network interfaces %+v, public IP %v", ni, aws.ToString(inst.PublicIpAddress))
				}
				l, err := f.env.Cloud.DescribeInstances(context.Background(), api.DescribeInstancesRequest{
					InstanceIDs: []string{aws.ToString(inst.InstanceId)}, IncludeUserData: true})
				if err != nil || len(l) != 1 || !strings.Contains(string(l[0].UserData), "api-int."+infra) {
					t.Errorf("user data of %+v: %v", l, err)
				}
			}},
		{name: "ami-filters-subnet-id-volumes",
			edit: func(ps *machinev1beta1.AWSMachineProviderConfig) {
				ps.AMI = machinev1beta1.AWSResourceReference{Filters: []machinev1beta1.Filter{{Name: "name", Values: []string{"rhcos-*-x86_64"}}}}
				ps.Subnet = machinev1beta1.AWSResourceReference{ID: aws.String(publicB)}
				ps.Placement.AvailabilityZone = "us-east-1b"
				ps.SecurityGroups = []machinev1beta1.AWSResourceReference{{ID: aws.String(controlPlaneSG)}}
				ps.KeyName = aws.String("lab-key")
				ps.PublicIP = aws.Bool(true)
				ps.MetadataServiceOptions.Authentication = machinev1beta1.MetadataServiceAuthenticationRequired
				ps.Tags = append(ps.Tags, machinev1beta1.TagSpecification{Name: "team", Value: "machina"})
				ps.BlockDevices = []machinev1beta1.BlockDeviceMappingSpec{
					{EBS: &machinev1beta1.EBSBlockDeviceSpec{VolumeSize: ptr.To[int64](200), VolumeType: aws.String("io1"), Iops: ptr.To[int64](3000)}},
					{DeviceName: aws.String("/dev/sdb"), EBS: &machinev1beta1.EBSBlockDeviceSpec{VolumeSize: ptr.To[int64](500), VolumeType: aws.String("gp3"),
						Iops: ptr.To[int64](4000), ThroughputMib: ptr.To[int32](250), Encrypted: aws.Bool(true),
						KMSKey: machinev1beta1.AWSResourceReference{ARN: aws.String(kmsKey)}}},
				}
			},
			check: func(t *testing.T, f *fixture, m *machinev1beta1.Machine, inst ec2types.Instance) {
				// rhcos-9.6 is newer than rhcos-9.4: the newest matching AMI wins.
				if aws.ToString(inst.ImageId) != "ami-0a8f3c6e2b1d94f57" || aws.ToString(inst.KeyName) != "lab-key" ||
					aws.ToString(inst.SubnetId) != publicB ||
					!slices.Equal(groupIDs(inst), []string{controlPlaneSG}) || tagMap(inst.Tags)["team"] != "machina" {
					t.Errorf("image %s key %s subnet %s groups %v tags %v", aws.ToString(inst.ImageId), aws.ToString(inst.KeyName),
						aws.ToString(inst.SubnetId), groupIDs(inst), tagMap(inst.Tags))
				}
				vols := f.volumes(t, aws.ToString(inst.InstanceId))
				root, extra := vols["/dev/xvda"], vols["/dev/sdb"]
				if aws.ToInt32(root.Size) != 200 || root.VolumeType != ec2types.VolumeTypeIo1 || aws.ToInt32(root.Iops) != 3000 || len(vols) != 2 {
					t.Errorf("root volume %+v (%d volumes)", root, len(vols))
				}
				if aws.ToInt32(extra.Size) != 500 || extra.VolumeType != ec2types.VolumeTypeGp3 || aws.ToInt32(extra.Iops) != 4000 ||
					aws.ToInt32(extra.Throughput) != 250 || !aws.ToBool(extra.Encrypted) || aws.ToString(extra.KmsKeyId) != kmsKey {
					t.Errorf("extra volume %+v", extra)
				}
				if inst.MetadataOptions == nil || inst.MetadataOptions.HttpTokens != ec2types.HttpTokensStateRequired {
					t.Errorf("metadata options %+v", inst.MetadataOptions)
				}
				ip := aws.ToString(inst.PublicIpAddress)
				if ip == "" || !slices.Contains(m.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: ip}) {
					t.Errorf("public IP %q, addresses %v", ip, m.Status.Addresses)
				}
			}},
		{name: "zone-only",
			edit: func(ps *machinev1beta1.AWSMachineProviderConfig) {
				ps.Subnet, ps.Placement.AvailabilityZone = machinev1beta1.AWSResourceReference{}, "us-east-1c"
				ps.SecurityGroups = []machinev1beta1.AWSResourceReference{sg(infra + "-node")}
			},
			check: func(t *testing.T, _ *fixture, m *machinev1beta1.Machine, inst ec2types.Instance) {
				if aws.ToString(inst.Placement.AvailabilityZone) != "us-east-1c" || !strings.HasPrefix(ptr.Deref(m.Spec.ProviderID, ""), "aws:///us-east-1c/") {
					t.Errorf("zone %s, provider ID %s", aws.ToString(inst.Placement.AvailabilityZone), ptr.Deref(m.Spec.ProviderID, ""))
				}
			}},
		{name: "spot",
			edit: func(ps *machinev1beta1.AWSMachineProviderConfig) {
				ps.SpotMarketOptions = &machinev1beta1.SpotMarketOptions{MaxPrice: aws.String("0.25")}
			},
			check: func(t *testing.T, _ *fixture, m *machinev1beta1.Machine, inst ec2types.Instance) {
				if inst.InstanceLifecycle != ec2types.InstanceLifecycleTypeSpot {
					t.Errorf("lifecycle %q", inst.InstanceLifecycle)
				}
				if _, ok := m.Spec.Labels[awsactuator.LabelInterruptible]; !ok {
					t.Errorf("spec.metadata.labels %v lack %s", m.Spec.Labels, awsactuator.LabelInterruptible)
				}
			}},
		{name: "placement-group-dedicated",
			edit: func(ps *machinev1beta1.AWSMachineProviderConfig) {
				ps.Placement.Tenancy = machinev1beta1.DedicatedTenancy
				ps.PlacementGroupName, ps.PlacementGroupPartition = "pg-"+infra, ptr.To[int32](3)
			},
			check: func(t *testing.T, _ *fixture, _ *machinev1beta1.Machine, inst ec2types.Instance) {
				p := inst.Placement
				if p.Tenancy != ec2types.TenancyDedicated || aws.ToString(p.GroupName) != "pg-"+infra || aws.ToInt32(p.PartitionNumber) != 3 {
					t.Errorf("placement %+v", p)
				}
			}},
		{name: "dedicated-host",
			edit: func(ps *machinev1beta1.AWSMachineProviderConfig) {
				ps.Placement.Tenancy = machinev1beta1.HostTenancy
				ps.Placement.Host = &machinev1beta1.HostPlacement{Affinity: ptr.To(machinev1beta1.HostAffinityDedicatedHost),
					DedicatedHost: &machinev1beta1.DedicatedHost{ID: dedicatedHost}}
			},
			check: func(t *testing.T, _ *fixture, m *machinev1beta1.Machine, inst ec2types.Instance) {
				p := inst.Placement
				if p.Tenancy != ec2types.TenancyHost || aws.ToString(p.HostId) != dedicatedHost || aws.ToString(p.Affinity) != "host" {
					t.Errorf("placement %+v", p)
				}
				if st, _ := awsactuator.ProviderStatus(m); st == nil || st.DedicatedHost == nil || st.DedicatedHost.ID != dedicatedHost {
					t.Errorf("providerStatus %+v", st)
				}
			}},
		{name: "capacity-block",
			edit: func(ps *machinev1beta1.AWSMachineProviderConfig) {
				ps.MarketType, ps.CapacityReservationID = machinev1beta1.MarketTypeCapacityBlock, "cr-0123456789abcdef0"
			},
			check: func(t *testing.T, _ *fixture, _ *machinev1beta1.Machine, inst ec2types.Instance) {
				cr := inst.CapacityReservationSpecification
				if cr == nil || cr.CapacityReservationTarget == nil || aws.ToString(cr.CapacityReservationTarget.CapacityReservationId) != "cr-0123456789abcdef0" {
					t.Errorf("capacity reservation %+v", cr)
				}
			}},
		{name: "efa",
			edit: func(ps *machinev1beta1.AWSMachineProviderConfig) {
				ps.InstanceType, ps.NetworkInterfaceType = "p4d.24xlarge", machinev1beta1.AWSEFANetworkInterfaceType
			},
			check: func(t *testing.T, _ *fixture, _ *machinev1beta1.Machine, inst ec2types.Instance) {
				if ni := inst.NetworkInterfaces; len(ni) != 1 || aws.ToString(ni[0].InterfaceType) != "efa" {
					t.Errorf("network interfaces %+v", ni)
				}
			}},
	}
}

// invalidCase is a Machine that must end Failed with a message naming parts.
type invalidCase struct {
	name  string
	edit  func(*machinev1beta1.AWSMachineProviderConfig)
	parts []string
}

func invalidCases() []invalidCase {
	return []invalidCase{
		{name: "ami-filters-match-nothing", parts: []string{"spec.providerSpec.value.ami.filters", "no AMI matches"},
			edit: func(ps *machinev1beta1.AWSMachineProviderConfig) {
				ps.AMI = machinev1beta1.AWSResourceReference{Filters: []machinev1beta1.Filter{{Name: "name", Values: []string{"fedora-*"}}}}
			}},
		{name: "subnet-unknown", parts: []string{"spec.providerSpec.value.subnet", "subnet-0000000000000dead"},
			edit: func(ps *machinev1beta1.AWSMachineProviderConfig) {
				ps.Subnet = machinev1beta1.AWSResourceReference{ID: aws.String("subnet-0000000000000dead")}
			}},
		{name: "security-groups-match-nothing", parts: []string{"spec.providerSpec.value.securityGroups[0].filters"},
			edit: func(ps *machinev1beta1.AWSMachineProviderConfig) {
				ps.SecurityGroups = []machinev1beta1.AWSResourceReference{{Filters: []machinev1beta1.Filter{{Name: "tag:Name", Values: []string{"nope"}}}}}
			}},
		{name: "efa-unsupported", parts: []string{"spec.providerSpec.value.networkInterfaceType", "InvalidParameterValue"},
			edit: func(ps *machinev1beta1.AWSMachineProviderConfig) {
				ps.NetworkInterfaceType = machinev1beta1.AWSEFANetworkInterfaceType
			}},
	}
}

// testThrottled: RunInstances throttled more often than the SDK retries; the Machine
// records RequestLimitExceeded and runs once the throttling stops.
func testThrottled(t *testing.T, f *fixture) {
	f.fault(t, "throttle,op=RunInstances,count=4,tag=Name=throttled")
	m := f.machine(t, "throttled", nil, nil)
	m, _ = f.running(t, m)
	if r := f.events(t, m); !slices.Contains(r, "RequestLimitExceeded") {
		t.Errorf("event reasons %v lack RequestLimitExceeded", r)
	}
	f.deleted(t, m)
}

// testCapacity: launches refused for capacity leave the Machine Provisioning with the
// EC2 code in its MachineCreation condition; it runs once capacity returns.
func testCapacity(t *testing.T, f *fixture) {
	// Only this Machine asks for r5.xlarge (a capacity fault is per zone or instance type).
	clear := f.fault(t, "capacity,op=RunInstances,instance-type=r5.xlarge")
	m := f.machine(t, "capacity", nil, func(ps *machinev1beta1.AWSMachineProviderConfig) { ps.InstanceType = "r5.xlarge" })
	c := f.creationCondition(t, m, "InsufficientInstanceCapacity")
	if !strings.Contains(c.Message, "EC2 error InsufficientInstanceCapacity") {
		t.Errorf("condition message %q", c.Message)
	}
	if cur, _ := f.get(context.Background(), m); ptr.Deref(cur.Status.Phase, "") != machinev1beta1.PhaseProvisioning || len(f.instances(t, m)) != 0 {
		t.Errorf("while refused: %s", describe(cur))
	}
	clear()
	m, _ = f.running(t, m)
	if n := len(f.instances(t, m)); n != 1 {
		t.Errorf("%d instances, want 1", n)
	}
	f.deleted(t, m)
}

// testBadCredentials: a credentialsSecret EC2 refuses gives an AuthFailure condition (not
// Failed: credentials are fixed in the Secret); the corrected Secret is used.
func testBadCredentials(t *testing.T, f *fixture) {
	ctx := context.Background()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bad-credentials", Namespace: f.cluster.MachineAPINamespace},
		Data: map[string][]byte{awsclient.SecretAccessKeyID: []byte(f.cluster.AccessKeyID), awsclient.SecretSecretAccessKey: []byte("wrong")}}
	if err := f.env.Client.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	m := f.machine(t, "bad-credentials", nil, func(ps *machinev1beta1.AWSMachineProviderConfig) {
		ps.CredentialsSecret = &corev1.LocalObjectReference{Name: s.Name}
	})
	f.waitMachine(t, m, 2*time.Minute, "AuthFailure reported", func(m *machinev1beta1.Machine) bool {
		return slices.ContainsFunc(m.Status.Conditions, func(c machinev1beta1.Condition) bool { return c.Reason == "AuthFailure" })
	})
	s.Data[awsclient.SecretSecretAccessKey] = []byte(f.cluster.SecretAccessKey)
	if err := f.env.Client.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	m, _ = f.running(t, m)
	f.deleted(t, m)
}

// testTerminatedOutside: an instance terminated behind the controller's back fails its
// Machine.
func testTerminatedOutside(t *testing.T, f *fixture) {
	m, inst := f.running(t, f.machine(t, "terminated-outside", nil, nil))
	if _, err := f.ec2.TerminateInstances(context.Background(), &awsec2.TerminateInstancesInput{InstanceIds: []string{aws.ToString(inst.InstanceId)}}); err != nil {
		t.Fatal(err)
	}
	f.failed(t, m, "deleted outside of machina")
	f.deleted(t, m)
}

// testLoadBalancers: a control-plane Machine is registered with its network load
// balancer's target groups and its classic load balancer, and deregistered on deletion.
func testLoadBalancers(t *testing.T, f *fixture) {
	infra := f.cluster.Name
	m := f.machine(t, "control-plane", map[string]string{"machine.openshift.io/cluster-api-machine-role": "master"},
		func(ps *machinev1beta1.AWSMachineProviderConfig) {
			ps.LoadBalancers = []machinev1beta1.LoadBalancerReference{
				{Name: infra + "-int", Type: machinev1beta1.NetworkLoadBalancerType},
				{Name: infra + "-apiserver", Type: machinev1beta1.ClassicLoadBalancerType}}
		})
	m, inst := f.running(t, m)
	id := aws.ToString(inst.InstanceId)
	f.env.For(t).Eventually(time.Minute, "registered", func(ctx context.Context) (bool, string, error) {
		got := f.registrations(t, id)
		return slices.Equal(got, []string{infra + "-aint", infra + "-apiserver", infra + "-sint"}), strings.Join(got, ","), nil
	})
	f.deleted(t, m)
	if got := f.registrations(t, id); len(got) != 0 {
		t.Errorf("after deletion still registered with %v", got)
	}
}

// registrations lists the target groups and classic load balancers the instance is in.
func (f *fixture) registrations(t testing.TB, id string) []string {
	ctx := context.Background()
	var out []string
	tgs, err := f.elbv2.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range tgs.TargetGroups {
		h, err := f.elbv2.DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: tg.TargetGroupArn})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range h.TargetHealthDescriptions {
			if aws.ToString(d.Target.Id) == id {
				out = append(out, aws.ToString(tg.TargetGroupName))
			}
		}
	}
	lbs, err := f.elb.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{})
	if err != nil {
		t.Fatal(err)
	}
	for _, lb := range lbs.LoadBalancerDescriptions {
		for _, i := range lb.Instances {
			if aws.ToString(i.InstanceId) == id {
				out = append(out, aws.ToString(lb.LoadBalancerName))
			}
		}
	}
	slices.Sort(out)
	return out
}

// testCrashMidCreate: the manager dies after RunInstances but before the Machine records
// the instance; the restarted manager finds that instance by its client token and
// launches no second one.
func testCrashMidCreate(t *testing.T, f *fixture) {
	const name = "crash-mid-create"
	lift := f.holdProviderID(t, name)
	m := f.machine(t, name, nil, nil)
	f.env.For(t).Eventually(2*time.Minute, "instance launched", func(context.Context) (bool, string, error) {
		n := len(f.instances(t, m))
		return n > 0, "no instance yet", nil
	})
	f.env.StopManager()
	cur, err := f.get(context.Background(), m)
	if err != nil || ptr.Deref(cur.Spec.ProviderID, "") != "" {
		t.Fatalf("the hold did not keep the provider ID out: %v, %s", err, describe(cur))
	}
	lift()
	f.env.For(t).StartManager()
	m, inst := f.running(t, m)
	l := f.instances(t, m)
	if len(l) != 1 || l[0].InstanceID != aws.ToString(inst.InstanceId) {
		t.Errorf("instances for the Machine: %+v, want exactly %s", l, aws.ToString(inst.InstanceId))
	}
	f.deleted(t, m)
}

func groupIDs(inst ec2types.Instance) []string {
	var ids []string
	for _, g := range inst.SecurityGroups {
		ids = append(ids, aws.ToString(g.GroupId))
	}
	slices.Sort(ids)
	return ids
}

func tagMap(tags []ec2types.Tag) map[string]string {
	m := map[string]string{}
	for _, t := range tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m
}
