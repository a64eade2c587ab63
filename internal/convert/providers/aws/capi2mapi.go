package aws

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"

	mapiv1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	capav1 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/machina-dev/machina/internal/convert"
)

// FromInfra converts an AWSMachine spec and the Machine's values back into an
// AWSMachineProviderConfig, one section of the providerSpec after the other. The region and
// credentials secret come from the cluster.
func (p Platform) FromInfra(spec convert.InfraSpec, mv convert.MachineValues, paths convert.InfraPaths, r *convert.Report) *runtime.RawExtension {
	s, ok := convert.InfraSpecAs[capav1.AWSMachineSpec](spec, paths.Infra, r)
	if !ok {
		return nil
	}
	path := paths.Infra
	ps := &mapiv1.AWSMachineProviderConfig{}
	ps.APIVersion = mapiv1.GroupVersion.String()
	ps.Kind = ProviderSpecKind
	instanceToMAPI(s, ps, path, r)
	p.secretsToMAPI(s, mv.DataSecretName, ps, path, r)
	p.networkToMAPI(s, ps, path, r)
	ps.LoadBalancers = p.loadBalancersToMAPI(mv.ControlPlane, paths, r)
	p.placementToMAPI(s, mv.FailureDomain, ps, path, r)
	storageToMAPI(s, ps, path, r)
	purchasingToMAPI(s, ps, path, r)
	if o := s.InstanceMetadataOptions; o != nil {
		ps.MetadataServiceOptions.Authentication = metadataServiceToMAPI(o, path.Child("instanceMetadataOptions"), r)
	}
	return convert.Encode(ps, path, r)
}

// unsupported reports a field of the AWSMachine spec the Machine API cannot express.
func unsupported(r *convert.Report, path *field.Path, name string, v any) {
	r.Unsupported(path.Child(name), v, convert.MachineAPI)
}

// instanceToMAPI converts the image and the instance: AMI (by ID only; CAPA's lookups have
// no Machine API counterpart), type, CPU options, tags and instance profile.
func instanceToMAPI(s *capav1.AWSMachineSpec, ps *mapiv1.AWSMachineProviderConfig, path *field.Path, r *convert.Report) {
	if s.AMI.ID == nil || *s.AMI.ID == "" {
		r.Error(field.Required(path.Child("ami", "id"), "the Machine API needs an explicit AMI"))
	} else {
		ps.AMI.ID = ptr.To(*s.AMI.ID)
	}
	if s.AMI.EKSOptimizedLookupType != nil {
		r.Unsupported(path.Child("ami", "eksLookupType"), *s.AMI.EKSOptimizedLookupType, convert.MachineAPI)
	}
	if s.ImageLookupFormat != "" {
		unsupported(r, path, "imageLookupFormat", s.ImageLookupFormat)
	}
	if s.ImageLookupOrg != "" {
		unsupported(r, path, "imageLookupOrg", s.ImageLookupOrg)
	}
	if s.ImageLookupBaseOS != "" {
		unsupported(r, path, "imageLookupBaseOS", s.ImageLookupBaseOS)
	}
	ps.InstanceType = s.InstanceType
	if s.InstanceType == "" {
		r.Error(field.Required(path.Child("instanceType"), ""))
	}
	if v := s.CPUOptions.ConfidentialCompute; v != "" {
		ps.CPUOptions = &mapiv1.CPUOptions{ConfidentialCompute: ptr.To(mapiv1.AWSConfidentialComputePolicy(v))}
	}
	if v := s.CPUOptions.NestedVirtualization; v != "" {
		r.Unsupported(path.Child("cpuOptions", "nestedVirtualization"), v, convert.MachineAPI)
	}
	ps.Tags = tagsToMAPI(s.AdditionalTags, path.Child("additionalTags"), r)
	if s.IAMInstanceProfile != "" {
		ps.IAMInstanceProfile = &mapiv1.AWSResourceReference{ID: ptr.To(s.IAMInstanceProfile)}
	}
}

// secretsToMAPI names the user data secret (the Machine's bootstrap data secret, dataSecret),
// the cluster's credentials secret and the SSH key, and checks that the user data reaches the
// instance as the Machine API hands it over: unchanged.
func (p Platform) secretsToMAPI(s *capav1.AWSMachineSpec, dataSecret *string, ps *mapiv1.AWSMachineProviderConfig, path *field.Path, r *convert.Report) {
	if dataSecret != nil && *dataSecret != "" {
		ps.UserDataSecret = &corev1.LocalObjectReference{Name: *dataSecret}
	}
	ps.CredentialsSecret = &corev1.LocalObjectReference{Name: p.credentialsSecret()}
	ps.KeyName = copyString(s.SSHKeyName)
	switch ig := s.Ignition; ig {
	case nil:
		r.Warn(path.Child("ignition"), "unset: CAPA would treat the user data as cloud-init; the Machine API hands it to the instance unchanged")
	default:
		if ig.StorageType != capav1.IgnitionStorageTypeOptionUnencryptedUserData {
			r.Error(field.NotSupported(path.Child("ignition", "storageType"), ig.StorageType, []string{string(capav1.IgnitionStorageTypeOptionUnencryptedUserData)}))
		}
		if ig.Version != "" {
			r.Warn(path.Child("ignition", "version"), "dropped: the user data states its own Ignition version")
		}
		if ig.Proxy != nil {
			r.Unsupported(path.Child("ignition", "proxy"), "<set>", convert.MachineAPI)
		}
		if ig.TLS != nil {
			r.Unsupported(path.Child("ignition", "tls"), "<set>", convert.MachineAPI)
		}
	}
	if s.UncompressedUserData != nil {
		r.Warn(path.Child("uncompressedUserData"), "dropped: the Machine API never compresses user data")
	}
	if s.CloudInit != (capav1.CloudInit{}) {
		unsupported(r, path, "cloudInit", "<set>")
	}
}

// networkToMAPI converts the public IP, network interface type, security groups and subnet,
// and checks what a dual-stack cluster's actuator derives; the load balancers are
// loadBalancersToMAPI's.
func (p Platform) networkToMAPI(s *capav1.AWSMachineSpec, ps *mapiv1.AWSMachineProviderConfig, path *field.Path, r *convert.Report) {
	ps.PublicIP = copyBool(s.PublicIP)
	if s.ElasticIPPool != nil {
		unsupported(r, path, "elasticIpPool", "<set>")
	}
	switch s.NetworkInterfaceType {
	case "":
	case capav1.NetworkInterfaceTypeENI:
		ps.NetworkInterfaceType = mapiv1.AWSENANetworkInterfaceType
	case capav1.NetworkInterfaceTypeEFAWithENAInterface:
		ps.NetworkInterfaceType = mapiv1.AWSEFANetworkInterfaceType
	default:
		r.Error(field.NotSupported(path.Child("networkInterfaceType"), s.NetworkInterfaceType, []string{"interface", "efa"}))
	}
	for i, sg := range s.AdditionalSecurityGroups {
		ps.SecurityGroups = append(ps.SecurityGroups, refToMAPI(sg, path.Child("additionalSecurityGroups").Index(i), r))
	}
	if s.Subnet != nil {
		ps.Subnet = refToMAPI(*s.Subnet, path.Child("subnet"), r)
	}
	if len(s.SecurityGroupOverrides) > 0 {
		unsupported(r, path, "securityGroupOverrides", sortedRoles(s.SecurityGroupOverrides))
	}
	if len(s.NetworkInterfaces) > 0 {
		unsupported(r, path, "networkInterfaces", s.NetworkInterfaces)
	}
	p.dualStackToMAPI(s, path, r)
}

// placementToMAPI places the instance in the cluster's region and the Machine's failure
// domain (zone), and converts tenancy, dedicated host and placement group.
func (p Platform) placementToMAPI(s *capav1.AWSMachineSpec, zone string, ps *mapiv1.AWSMachineProviderConfig, path *field.Path, r *convert.Report) {
	ps.Placement.Region = p.Region
	ps.Placement.AvailabilityZone = zone
	switch t := s.Tenancy; t {
	case "", string(mapiv1.DefaultTenancy), string(mapiv1.DedicatedTenancy), string(mapiv1.HostTenancy):
		ps.Placement.Tenancy = mapiv1.InstanceTenancy(t)
	default:
		r.Error(field.NotSupported(path.Child("tenancy"), t, []string{"default", "dedicated", "host"}))
	}
	ps.Placement.Host = hostToMAPI(s, path, r)
	ps.PlacementGroupName = s.PlacementGroupName
	if v := s.PlacementGroupPartition; v != 0 {
		if v < 0 || v > math.MaxInt32 {
			r.Error(field.Invalid(path.Child("placementGroupPartition"), v, "out of range"))
		} else {
			ps.PlacementGroupPartition = ptr.To(int32(v))
		}
	}
}

// storageToMAPI converts the volumes: the root volume first, as the device without a name,
// then the non-root volumes in order.
func storageToMAPI(s *capav1.AWSMachineSpec, ps *mapiv1.AWSMachineProviderConfig, path *field.Path, r *convert.Report) {
	if s.RootVolume != nil {
		vp := path.Child("rootVolume")
		if s.RootVolume.DeviceName != "" {
			r.Warn(vp.Child("deviceName"), "dropped: the root volume is the AMI's root device in both APIs")
		}
		ps.BlockDevices = append(ps.BlockDevices, mapiv1.BlockDeviceMappingSpec{EBS: volumeToMAPI(*s.RootVolume, vp, r)})
	}
	for i, v := range s.NonRootVolumes {
		vp := path.Child("nonRootVolumes").Index(i)
		if v.DeviceName == "" {
			r.Error(field.Required(vp.Child("deviceName"), "non-root volumes need a device name"))
			continue
		}
		ps.BlockDevices = append(ps.BlockDevices, mapiv1.BlockDeviceMappingSpec{DeviceName: ptr.To(v.DeviceName), EBS: volumeToMAPI(v, vp, r)})
	}
}

// purchasingToMAPI converts the spot options, the market type and the capacity reservation.
func purchasingToMAPI(s *capav1.AWSMachineSpec, ps *mapiv1.AWSMachineProviderConfig, path *field.Path, r *convert.Report) {
	if s.SpotMarketOptions != nil {
		ps.SpotMarketOptions = &mapiv1.SpotMarketOptions{MaxPrice: copyString(s.SpotMarketOptions.MaxPrice)}
	}
	switch m := s.MarketType; m {
	case "", capav1.MarketTypeOnDemand, capav1.MarketTypeSpot, capav1.MarketTypeCapacityBlock:
		ps.MarketType = mapiv1.MarketType(m)
	default:
		r.Error(field.NotSupported(path.Child("marketType"), m, []string{"OnDemand", "Spot", "CapacityBlock"}))
	}
	ps.CapacityReservationID = ptr.Deref(s.CapacityReservationID, "")
	if v := s.CapacityReservationPreference; v != "" {
		unsupported(r, path, "capacityReservationPreference", v)
	}
}

// metadataServiceToMAPI returns the Machine API's authentication setting for CAPA's instance
// metadata options (path), which must otherwise be what the Machine API's actuator always
// sets: the endpoint enabled, no IPv6 endpoint, a hop limit of 1, no instance tags.
func metadataServiceToMAPI(o *capav1.InstanceMetadataOptions, path *field.Path, r *convert.Report) mapiv1.MetadataServiceAuthentication {
	if o.HTTPEndpoint != "" && o.HTTPEndpoint != capav1.InstanceMetadataEndpointStateEnabled {
		r.Unsupported(path.Child("httpEndpoint"), o.HTTPEndpoint, convert.MachineAPI+" (the endpoint is always enabled)")
	}
	if o.HTTPProtocolIPv6 != "" && o.HTTPProtocolIPv6 != capav1.InstanceMetadataEndpointStateDisabled {
		r.Unsupported(path.Child("httpProtocolIpv6"), o.HTTPProtocolIPv6, convert.MachineAPI)
	}
	if o.HTTPPutResponseHopLimit != 0 && o.HTTPPutResponseHopLimit != 1 {
		r.Unsupported(path.Child("httpPutResponseHopLimit"), o.HTTPPutResponseHopLimit, convert.MachineAPI+" (the hop limit is 1)")
	}
	if o.InstanceMetadataTags != "" && o.InstanceMetadataTags != capav1.InstanceMetadataEndpointStateDisabled {
		r.Unsupported(path.Child("instanceMetadataTags"), o.InstanceMetadataTags, convert.MachineAPI)
	}
	switch o.HTTPTokens {
	case "":
	case capav1.HTTPTokensStateRequired:
		return mapiv1.MetadataServiceAuthenticationRequired
	case capav1.HTTPTokensStateOptional:
		return mapiv1.MetadataServiceAuthenticationOptional
	default:
		r.Error(field.NotSupported(path.Child("httpTokens"), o.HTTPTokens, []string{"required", "optional"}))
	}
	return ""
}

func tagsToMAPI(tags capav1.Tags, path *field.Path, r *convert.Report) []mapiv1.TagSpecification {
	if len(tags) == 0 {
		return nil
	}
	out := make([]mapiv1.TagSpecification, 0, len(tags))
	for k, v := range tags {
		if k == "" {
			r.Error(field.Required(path.Key(""), "tags need a name"))
			continue
		}
		out = append(out, mapiv1.TagSpecification{Name: k, Value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func refToMAPI(ref capav1.AWSResourceReference, path *field.Path, r *convert.Report) mapiv1.AWSResourceReference {
	var out mapiv1.AWSResourceReference
	if ref.ID != nil {
		out.ID = ptr.To(*ref.ID)
	}
	for _, f := range ref.Filters {
		out.Filters = append(out.Filters, mapiv1.Filter{Name: f.Name, Values: append([]string(nil), f.Values...)})
	}
	switch {
	case ref.ID == nil && len(ref.Filters) == 0:
		r.Error(field.Required(path, "an id or filters"))
	case ref.ID != nil && len(ref.Filters) > 0:
		r.Error(field.Forbidden(path, "set an id or filters, not both"))
	}
	return out
}

// hostToMAPI converts the dedicated host placement. An unset hostAffinity is CAPA's default;
// "default" without a host is no host placement at all.
func hostToMAPI(s *capav1.AWSMachineSpec, path *field.Path, r *convert.Report) *mapiv1.HostPlacement {
	affinity := ptr.Deref(s.HostAffinity, hostAffinityDefault)
	if s.HostID == nil && s.DynamicHostAllocation == nil && affinity == hostAffinityDefault {
		return nil
	}
	h := &mapiv1.HostPlacement{}
	switch affinity {
	case hostAffinityDefault:
		h.Affinity = ptr.To(mapiv1.HostAffinityAnyAvailable)
	case hostAffinityHost:
		h.Affinity = ptr.To(mapiv1.HostAffinityDedicatedHost)
	default:
		r.Error(field.NotSupported(path.Child("hostAffinity"), affinity, []string{hostAffinityDefault, hostAffinityHost}))
	}
	switch {
	case s.HostID != nil && s.DynamicHostAllocation != nil:
		r.Error(field.Forbidden(path.Child("dynamicHostAllocation"), "hostID and dynamicHostAllocation are mutually exclusive"))
	case s.HostID != nil:
		h.DedicatedHost = &mapiv1.DedicatedHost{AllocationStrategy: ptr.To(mapiv1.AllocationStrategyUserProvided), ID: *s.HostID}
	case s.DynamicHostAllocation != nil:
		h.DedicatedHost = &mapiv1.DedicatedHost{AllocationStrategy: ptr.To(mapiv1.AllocationStrategyDynamic)}
		if tags := s.DynamicHostAllocation.Tags; len(tags) > 0 {
			list := tagsToMAPI(tags, path.Child("dynamicHostAllocation", "tags"), r)
			h.DedicatedHost.DynamicHostAllocation = &mapiv1.DynamicHostAllocationSpec{Tags: &list}
		}
	}
	return h
}

// dualStackToMAPI checks the fields OpenShift's AWS actuator derives from a dual-stack
// cluster's ipFamily: on such a cluster they must say what the actuator does; elsewhere the
// Machine API cannot express them.
func (p Platform) dualStackToMAPI(s *capav1.AWSMachineSpec, path *field.Path, r *convert.Report) {
	if !isDualStack(p.IPFamily) {
		const why = convert.MachineAPI + " outside a dual-stack cluster (Infrastructure status.platformStatus.aws.ipFamily DualStackIPv4Primary or DualStackIPv6Primary)"
		if s.AssignPrimaryIPv6 != nil {
			r.Unsupported(path.Child("assignPrimaryIPv6"), *s.AssignPrimaryIPv6, why)
		}
		if s.PrivateDNSName != nil {
			r.Unsupported(path.Child("privateDnsName"), "<set>", why)
		}
		return
	}
	actuator := "on this dual-stack cluster (ipFamily " + string(p.IPFamily) + ") the Machine API's AWS actuator gives every instance "
	switch v := s.AssignPrimaryIPv6; {
	case v == nil:
		r.Warn(path.Child("assignPrimaryIPv6"), "unset; %sa primary IPv6 address", actuator)
	case *v != capav1.PrimaryIPv6AssignmentStateEnabled:
		r.Error(field.Invalid(path.Child("assignPrimaryIPv6"), *v, actuator+"a primary IPv6 address; only enabled can be converted"))
	}
	want := dualStackDNS()
	switch d := s.PrivateDNSName; {
	case d == nil:
		r.Warn(path.Child("privateDnsName"), "unset; %sa resource-name hostname with A and AAAA records", actuator)
	case !reflect.DeepEqual(d, want):
		r.Error(field.Invalid(path.Child("privateDnsName"), fmt.Sprintf("hostnameType=%s enableResourceNameDnsARecord=%v enableResourceNameDnsAAAARecord=%v",
			ptr.Deref(d.HostnameType, ""), ptr.Deref(d.EnableResourceNameDNSARecord, false), ptr.Deref(d.EnableResourceNameDNSAAAARecord, false)),
			actuator+"a resource-name hostname with A and AAAA records; only that can be converted"))
	}
}

// loadBalancersToMAPI gives a control-plane Machine the AWSCluster's control-plane load
// balancers, which CAPA registers it with.
func (p Platform) loadBalancersToMAPI(controlPlane bool, paths convert.InfraPaths, r *convert.Report) []mapiv1.LoadBalancerReference {
	if !controlPlane {
		return nil
	}
	label := paths.Metadata.Child("labels").Key(clusterv1.MachineControlPlaneLabel)
	known := p.ControlPlaneLoadBalancers
	switch {
	case known == nil:
		r.Error(field.Invalid(label, "", "a control-plane Machine's load balancers are the AWSCluster's, which is not known here; give the AWSCluster (--infrastructure)"))
		return nil
	case len(known.Problems) > 0:
		r.Error(field.Invalid(label, "", "the Machine API cannot name the AWSCluster's control-plane load balancers: "+strings.Join(known.Problems, "; ")))
		return nil
	case len(known.List) == 0:
		r.Error(field.Invalid(label, "", "the AWSCluster has no control-plane load balancer; a Machine API control-plane Machine is one registered with load balancers"))
		return nil
	}
	out := make([]mapiv1.LoadBalancerReference, len(known.List))
	for i, lb := range known.List {
		out[i] = mapiv1.LoadBalancerReference{Name: lb.Name, Type: lb.Type}
	}
	return out
}

func volumeToMAPI(v capav1.Volume, path *field.Path, r *convert.Report) *mapiv1.EBSBlockDeviceSpec {
	e := &mapiv1.EBSBlockDeviceSpec{Encrypted: copyBool(v.Encrypted)}
	switch {
	case v.Size == 0:
		r.Error(field.Required(path.Child("size"), ""))
	case v.Size < minVolumeSize:
		r.Error(field.Invalid(path.Child("size"), v.Size, "volumes are at least 8 GiB"))
	default:
		e.VolumeSize = ptr.To(v.Size)
	}
	if v.Type != "" {
		e.VolumeType = ptr.To(string(v.Type))
	}
	if v.IOPS < 0 {
		r.Error(field.Invalid(path.Child("iops"), v.IOPS, "must not be negative"))
	} else if v.IOPS != 0 {
		e.Iops = ptr.To(v.IOPS)
	}
	if t := v.Throughput; t != nil {
		if *t < 0 || *t > math.MaxInt32 {
			r.Error(field.Invalid(path.Child("throughput"), *t, "out of range"))
		} else {
			e.ThroughputMib = ptr.To(int32(*t))
		}
	}
	if k := v.EncryptionKey; k != "" {
		if isARN(k) {
			e.KMSKey.ARN = ptr.To(k)
		} else {
			e.KMSKey.ID = ptr.To(k)
		}
	}
	return e
}

func isARN(s string) bool { return strings.HasPrefix(s, "arn:") }

func sortedRoles(m map[capav1.SecurityGroupRole]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, string(k))
	}
	sort.Strings(out)
	return out
}
