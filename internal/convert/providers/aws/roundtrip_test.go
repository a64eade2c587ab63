package aws

import (
	"fmt"
	"sort"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	mapiv1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	capav1 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/machina-dev/machina/internal/convert"
	ct "github.com/machina-dev/machina/internal/convert/converttest"
)

const (
	region  = "us-east-1"
	cluster = "ci-op-7x2kq-abcde"
)

var testCtx = convert.Context{ClusterName: cluster, Platform: Platform{Region: region, CredentialsSecret: DefaultCredentialsSecret}, Namespaces: convert.OpenShiftNamespaces}

// installerLoadBalancers are the control-plane load balancers of an installer-made AWSCluster.
var installerLoadBalancers = []LoadBalancer{{Name: cluster + "-int", Type: mapiv1.NetworkLoadBalancerType}, {Name: cluster + "-ext", Type: mapiv1.NetworkLoadBalancerType}}

var suite = newSuite(testCtx.Platform.(Platform))

// dualStackSuite runs the same properties on a dual-stack cluster whose AWSCluster is known,
// with control-plane Machines among the generated ones.
var dualStackSuite = newSuite(Platform{Region: region, CredentialsSecret: DefaultCredentialsSecret,
	IPFamily: configv1.DualStackIPv6Primary, ControlPlaneLoadBalancers: &LoadBalancers{List: installerLoadBalancers}})

func newSuite(p Platform) ct.Suite[*mapiv1.AWSMachineProviderConfig, *capav1.AWSMachineSpec] {
	c := testCtx
	c.Platform = p
	return ct.Suite[*mapiv1.AWSMachineProviderConfig, *capav1.AWSMachineSpec]{
		Checker: ct.Checker{Ctx: c, DecodeProviderSpec: ct.DecodeJSON[mapiv1.AWSMachineProviderConfig]},
		ProviderSpec: func(g *ct.Gen) *mapiv1.AWSMachineProviderConfig {
			ps := genProviderSpec(g)
			if p.ControlPlaneLoadBalancers != nil && g.Intn(3) == 0 {
				for _, lb := range p.ControlPlaneLoadBalancers.List {
					ps.LoadBalancers = append(ps.LoadBalancers, mapiv1.LoadBalancerReference{Name: lb.Name, Type: lb.Type})
				}
			}
			return ps
		},
		RandomProviderSpec: randomProviderSpec,
		ProviderID:         genProviderID,
		InfraSpec: func(g *ct.Gen) *capav1.AWSMachineSpec {
			s := genSpec(g)
			if isDualStack(p.IPFamily) {
				s.AssignPrimaryIPv6 = ptr.To(capav1.PrimaryIPv6AssignmentStateEnabled)
				s.PrivateDNSName = dualStackDNS()
			}
			return s
		},
		MachineLabels: func(g *ct.Gen) map[string]string {
			if p.ControlPlaneLoadBalancers != nil && g.Intn(3) == 0 {
				return map[string]string{clusterv1.MachineControlPlaneLabel: ""}
			}
			return nil
		},
		RandomCAPIMachine:  randomCAPIMachine,
		MinAcceptedPercent: 5,
		ProviderSpecSeeds: []string{
			`{"apiVersion":"machine.openshift.io/v1beta1","kind":"AWSMachineProviderConfig","ami":{"id":"ami-1"},"instanceType":"m6i.xlarge","placement":{"region":"us-east-1","availabilityZone":"us-east-1a"},"userDataSecret":{"name":"worker-user-data"},"credentialsSecret":{"name":"aws-cloud-credentials"},"blockDevices":[{"ebs":{"volumeSize":120,"volumeType":"gp3","kmsKey":{"arn":"arn:aws:kms:us-east-1:1:key/x"}}}]}`,
			`{"ami":{"filters":[{"name":"x"}]},"placement":{"region":"eu-west-1"},"deviceIndex":1}`,
			`{"blockDevices":[{},{"deviceName":""}],"placement":{"host":{"dedicatedHost":{"allocationStrategy":"Dynamic","id":"h-1"}}}}`,
			`{"loadBalancers":[{"name":"x-int","type":"network"},{"name":"","type":"application"}],"placement":{}}`,
			`null`,
		},
	}
}

// TestRoundTrip runs the shared round-trip properties (see converttest.Suite) on AWS objects.
func TestRoundTrip(t *testing.T) { suite.Run(t) }

// TestRoundTripDualStack runs them on a dual-stack cluster with control-plane Machines.
func TestRoundTripDualStack(t *testing.T) { dualStackSuite.Run(t) }

func FuzzRoundTrip(f *testing.F) { suite.FuzzRoundTrip(f) }

func FuzzProviderSpecBytes(f *testing.F) { suite.FuzzProviderSpecBytes(f) }

func BenchmarkConvert(b *testing.B) { suite.Benchmark(b) }

func genProviderID(g *ct.Gen) string { return ct.Pick(g, "", "aws:///us-east-1a/i-0"+g.Token()) }

func genRef(g *ct.Gen) mapiv1.AWSResourceReference {
	if g.Maybe() {
		return mapiv1.AWSResourceReference{ID: ptr.To(ct.Pick(g, "sg-", "subnet-") + g.Token())}
	}
	return mapiv1.AWSResourceReference{Filters: []mapiv1.Filter{{Name: "tag:Name", Values: []string{g.Token()}}}}
}

func genMAPITags(g *ct.Gen) []mapiv1.TagSpecification {
	m := g.Map()
	var out []mapiv1.TagSpecification
	for k, v := range m {
		out = append(out, mapiv1.TagSpecification{Name: k, Value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func genEBS(g *ct.Gen) *mapiv1.EBSBlockDeviceSpec {
	e := &mapiv1.EBSBlockDeviceSpec{
		VolumeSize: ptr.To(int64(8 + g.Intn(500))),
		Encrypted:  g.BoolPtr(),
	}
	if g.Maybe() {
		e.VolumeType = ptr.To(ct.Pick(g, "gp2", "gp3", "io1", "io2"))
	}
	if g.Maybe() {
		e.Iops = ptr.To(int64(1 + g.Intn(16000)))
	}
	if g.Maybe() {
		e.ThroughputMib = ptr.To(int32(125 + g.Intn(1000)))
	}
	switch g.Intn(3) {
	case 0:
		e.KMSKey.ID = ptr.To(g.Token())
	case 1:
		e.KMSKey.ARN = ptr.To("arn:aws:kms:us-east-1:123456789012:key/" + g.Token())
	}
	return e
}

// genProviderSpec returns an AWSMachineProviderConfig in the form the converter accepts
// without warnings.
func genProviderSpec(g *ct.Gen) *mapiv1.AWSMachineProviderConfig {
	ps := &mapiv1.AWSMachineProviderConfig{
		AMI:               mapiv1.AWSResourceReference{ID: ptr.To("ami-" + g.Token())},
		InstanceType:      ct.Pick(g, "m6i.xlarge", "m6a.2xlarge", "c7g.large"),
		Tags:              genMAPITags(g),
		UserDataSecret:    &corev1.LocalObjectReference{Name: ct.Pick(g, "worker-user-data", g.Token())},
		CredentialsSecret: &corev1.LocalObjectReference{Name: DefaultCredentialsSecret},
		KeyName:           g.StrPtr(),
		PublicIP:          g.BoolPtr(),
		Placement: mapiv1.Placement{
			Region:           region,
			AvailabilityZone: ct.Pick(g, "", "us-east-1a", "us-east-1b"),
			Tenancy:          ct.Pick(g, "", mapiv1.DefaultTenancy, mapiv1.DedicatedTenancy, mapiv1.HostTenancy),
		},
		NetworkInterfaceType:  ct.Pick(g, "", mapiv1.AWSENANetworkInterfaceType, mapiv1.AWSEFANetworkInterfaceType),
		PlacementGroupName:    ct.Pick(g, "", "pg-"+g.Token()),
		CapacityReservationID: ct.Pick(g, "", "cr-"+g.Token()),
		MarketType:            ct.Pick(g, "", mapiv1.MarketTypeOnDemand, mapiv1.MarketTypeSpot, mapiv1.MarketTypeCapacityBlock),
	}
	ps.APIVersion, ps.Kind = mapiv1.GroupVersion.String(), ProviderSpecKind
	if g.Maybe() {
		ps.CPUOptions = &mapiv1.CPUOptions{ConfidentialCompute: ptr.To(ct.Pick(g, mapiv1.AWSConfidentialComputePolicyDisabled, mapiv1.AWSConfidentialComputePolicySEVSNP))}
	}
	if g.Maybe() {
		ps.IAMInstanceProfile = &mapiv1.AWSResourceReference{ID: ptr.To(cluster + "-worker-profile")}
	}
	for i := g.Intn(3); i > 0; i-- {
		ps.SecurityGroups = append(ps.SecurityGroups, genRef(g))
	}
	if g.Maybe() {
		ps.Subnet = genRef(g)
	}
	if ps.PlacementGroupName != "" && g.Maybe() {
		ps.PlacementGroupPartition = ptr.To(int32(1 + g.Intn(7)))
	}
	if g.Maybe() {
		ps.BlockDevices = append(ps.BlockDevices, mapiv1.BlockDeviceMappingSpec{EBS: genEBS(g)})
	}
	for i := g.Intn(3); i > 0; i-- {
		ps.BlockDevices = append(ps.BlockDevices, mapiv1.BlockDeviceMappingSpec{DeviceName: ptr.To(fmt.Sprintf("/dev/xvd%c", 'b'+i)), EBS: genEBS(g)})
	}
	if g.Intn(3) == 0 {
		ps.SpotMarketOptions = &mapiv1.SpotMarketOptions{MaxPrice: ct.Pick(g, nil, ptr.To("0.12"))}
	}
	ps.MetadataServiceOptions.Authentication = ct.Pick[mapiv1.MetadataServiceAuthentication](g, "", mapiv1.MetadataServiceAuthenticationRequired, mapiv1.MetadataServiceAuthenticationOptional)
	affinity := ptr.To(ct.Pick(g, mapiv1.HostAffinityAnyAvailable, mapiv1.HostAffinityDedicatedHost))
	switch g.Intn(4) {
	case 1:
		ps.Placement.Host = &mapiv1.HostPlacement{Affinity: ptr.To(mapiv1.HostAffinityDedicatedHost)}
	case 2:
		ps.Placement.Host = &mapiv1.HostPlacement{Affinity: affinity, DedicatedHost: &mapiv1.DedicatedHost{AllocationStrategy: ptr.To(mapiv1.AllocationStrategyUserProvided), ID: "h-0123456789abcdef0"}}
	case 3:
		d := &mapiv1.DedicatedHost{AllocationStrategy: ptr.To(mapiv1.AllocationStrategyDynamic)}
		if tags := genMAPITags(g); len(tags) > 0 {
			d.DynamicHostAllocation = &mapiv1.DynamicHostAllocationSpec{Tags: &tags}
		}
		ps.Placement.Host = &mapiv1.HostPlacement{Affinity: affinity, DedicatedHost: d}
	}
	return ps
}

func genVolume(g *ct.Gen, device string) capav1.Volume {
	v := capav1.Volume{DeviceName: device, Size: int64(8 + g.Intn(500)), Encrypted: g.BoolPtr()}
	if g.Maybe() {
		v.Type = ct.Pick[capav1.VolumeType](g, "gp3", "io2")
	}
	if g.Maybe() {
		v.IOPS = int64(1 + g.Intn(16000))
	}
	if g.Maybe() {
		v.Throughput = ptr.To(int64(125 + g.Intn(1000)))
	}
	v.EncryptionKey = ct.Pick(g, "", g.Token(), "arn:aws:kms:us-east-1:123456789012:key/"+g.Token())
	return v
}

func genCAPARef(g *ct.Gen) capav1.AWSResourceReference {
	if g.Maybe() {
		return capav1.AWSResourceReference{ID: ptr.To("sg-" + g.Token())}
	}
	return capav1.AWSResourceReference{Filters: []capav1.Filter{{Name: "tag:Name", Values: []string{g.Token()}}}}
}

// genSpec returns an AWSMachine spec in the form the converter accepts without warnings.
func genSpec(g *ct.Gen) *capav1.AWSMachineSpec {
	s := &capav1.AWSMachineSpec{
		AMI:                   capav1.AMIReference{ID: ptr.To("ami-" + g.Token())},
		InstanceType:          ct.Pick(g, "m6i.xlarge", "m6a.2xlarge"),
		AdditionalTags:        capav1.Tags(g.Map()),
		IAMInstanceProfile:    ct.Pick(g, "", "worker-profile"),
		PublicIP:              g.BoolPtr(),
		SSHKeyName:            g.StrPtr(),
		NetworkInterfaceType:  ct.Pick(g, "", capav1.NetworkInterfaceTypeENI, capav1.NetworkInterfaceTypeEFAWithENAInterface),
		Ignition:              userDataIgnition(),
		Tenancy:               ct.Pick(g, "", "default", "dedicated", "host"),
		PlacementGroupName:    ct.Pick(g, "", "pg"),
		MarketType:            ct.Pick(g, "", capav1.MarketTypeOnDemand, capav1.MarketTypeSpot),
		CapacityReservationID: g.StrPtr(),
	}
	if g.Maybe() {
		s.CPUOptions.ConfidentialCompute = capav1.AWSConfidentialComputePolicySEVSNP
	}
	for i := g.Intn(3); i > 0; i-- {
		s.AdditionalSecurityGroups = append(s.AdditionalSecurityGroups, genCAPARef(g))
	}
	if g.Maybe() {
		r := genCAPARef(g)
		s.Subnet = &r
	}
	if g.Maybe() {
		v := genVolume(g, "")
		s.RootVolume = &v
	}
	for i := g.Intn(3); i > 0; i-- {
		s.NonRootVolumes = append(s.NonRootVolumes, genVolume(g, fmt.Sprintf("/dev/sd%c", 'f'+i)))
	}
	if g.Intn(3) == 0 {
		s.SpotMarketOptions = &capav1.SpotMarketOptions{MaxPrice: g.StrPtr()}
	}
	switch g.Intn(3) {
	case 1:
		s.InstanceMetadataOptions = metadataOptions(capav1.HTTPTokensStateRequired)
	case 2:
		s.InstanceMetadataOptions = metadataOptions(capav1.HTTPTokensStateOptional)
	}
	switch g.Intn(4) {
	case 1:
		s.HostID = ptr.To("h-0123456789abcdef0")
	case 2:
		s.DynamicHostAllocation = &capav1.DynamicHostAllocationSpec{Tags: g.Map()}
	}
	s.HostAffinity = ptr.To(ct.Pick(g, hostAffinityDefault, hostAffinityHost)) // always set once admitted
	if s.PlacementGroupName != "" && g.Maybe() {
		s.PlacementGroupPartition = int64(1 + g.Intn(7))
	}
	return s
}

// randomProviderSpec is an arbitrary providerSpec, nudged half of the time towards values
// the converter accepts so both outcomes are exercised.
func randomProviderSpec(g *ct.Gen) *mapiv1.AWSMachineProviderConfig {
	var ps mapiv1.AWSMachineProviderConfig
	g.Fill.Fill(&ps)
	if g.Maybe() {
		return &ps
	}
	// Start from an accepted spec and take a few arbitrary fields.
	ok := genProviderSpec(g)
	for i := g.Intn(3); i >= 0; i-- {
		switch g.Intn(12) {
		case 0:
			ok.Tags = ps.Tags
		case 1:
			ok.BlockDevices = ps.BlockDevices
		case 2:
			ok.SecurityGroups, ok.Subnet = ps.SecurityGroups, ps.Subnet
		case 3:
			ok.Placement.Host, ok.Placement.Tenancy = ps.Placement.Host, ps.Placement.Tenancy
		case 4:
			ok.SpotMarketOptions, ok.MarketType = ps.SpotMarketOptions, ps.MarketType
		case 5:
			ok.IAMInstanceProfile, ok.KeyName, ok.PublicIP = ps.IAMInstanceProfile, ps.KeyName, ps.PublicIP
		case 6:
			ok.CPUOptions, ok.MetadataServiceOptions = ps.CPUOptions, ps.MetadataServiceOptions
		case 7:
			ok.Placement.AvailabilityZone, ok.Placement.Region = ps.Placement.AvailabilityZone, ct.Pick(g, "", region, ps.Placement.Region)
		case 8:
			ok.PlacementGroupName, ok.PlacementGroupPartition, ok.CapacityReservationID = ps.PlacementGroupName, ps.PlacementGroupPartition, ps.CapacityReservationID
		case 9:
			ok.CredentialsSecret, ok.NetworkInterfaceType = ps.CredentialsSecret, ps.NetworkInterfaceType
		case 10:
			ok.TypeMeta = ps.TypeMeta
		case 11:
			ok.AMI = ps.AMI
		}
	}
	return ok
}

// randomCAPIMachine is an arbitrary Cluster API Machine and AWSMachine spec, each nudged
// most of the time towards values the converter accepts.
func randomCAPIMachine(g *ct.Gen) (*clusterv1.Machine, *capav1.AWSMachineSpec, string) {
	var m clusterv1.Machine
	var spec capav1.AWSMachineSpec
	g.Fill.Fill(&m)
	g.Fill.Fill(&spec)
	pid := genProviderID(g)
	if g.Intn(3) > 0 {
		m = *g.CAPIMachine(testCtx, pid)
	}
	if g.Intn(3) > 0 {
		// An accepted spec with some arbitrary fields.
		ok := genSpec(g)
		switch g.Intn(8) {
		case 0:
			ok.AdditionalTags = spec.AdditionalTags
		case 1:
			ok.NonRootVolumes, ok.RootVolume = spec.NonRootVolumes, spec.RootVolume
		case 2:
			ok.InstanceMetadataOptions = spec.InstanceMetadataOptions
		case 3:
			ok.HostID, ok.HostAffinity, ok.DynamicHostAllocation, ok.Tenancy = spec.HostID, spec.HostAffinity, spec.DynamicHostAllocation, spec.Tenancy
		case 4:
			ok.AdditionalSecurityGroups, ok.Subnet = spec.AdditionalSecurityGroups, spec.Subnet
		case 5:
			ok.Ignition, ok.CloudInit, ok.UncompressedUserData = spec.Ignition, spec.CloudInit, spec.UncompressedUserData
		case 6:
			ok.SpotMarketOptions, ok.MarketType, ok.CapacityReservationID = spec.SpotMarketOptions, spec.MarketType, spec.CapacityReservationID
		case 7:
			ok.PlacementGroupName, ok.PlacementGroupPartition, ok.NetworkInterfaceType, ok.CPUOptions = spec.PlacementGroupName, spec.PlacementGroupPartition, spec.NetworkInterfaceType, spec.CPUOptions
		}
		spec = *ok
	}
	return &m, &spec, m.Spec.ProviderID
}
