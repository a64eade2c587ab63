package aws

import (
	"reflect"
	"slices"
	"strings"

	mapiv1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	capav1 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"

	"github.com/machina-dev/machina/internal/convert"
)

// userDataIgnition is how OpenShift's user data reaches the instance under CAPA: the secret
// holds an Ignition stub that EC2 receives unchanged, as with the Machine API.
func userDataIgnition() *capav1.Ignition {
	return &capav1.Ignition{StorageType: capav1.IgnitionStorageTypeOptionUnencryptedUserData}
}

// minVolumeSize is CAPA's lower bound for volume sizes (GiB).
const minVolumeSize = 8

// ToInfra converts an AWSMachineProviderConfig into an AWSMachine spec, one section of the
// providerSpec after the other.
func (p Platform) ToInfra(value *runtime.RawExtension, path *field.Path, r *convert.Report) (convert.InfraSpec, convert.MachineValues) {
	var ps mapiv1.AWSMachineProviderConfig
	if !convert.DecodeProviderSpec(value, &ps, path, r) {
		return nil, convert.MachineValues{}
	}
	var mv convert.MachineValues
	convert.CheckTypeMeta(ps.APIVersion, ps.Kind, convert.SpecType{APIVersion: mapiv1.GroupVersion.String(), Legacy: legacyAPIVersion, Kind: ProviderSpecKind}, path, r)
	if !reflect.ValueOf(ps.ObjectMeta).IsZero() {
		r.Warn(path.Child("metadata"), "ignored by the Machine API and dropped")
	}
	out := &capav1.AWSMachineSpec{Ignition: userDataIgnition()}
	instanceToCAPA(&ps, out, path, r)
	mv.DataSecretName = p.secretsToCAPA(&ps, out, path, r)
	mv.ControlPlane = p.networkToCAPA(&ps, out, path, r)
	mv.FailureDomain = p.placementToCAPA(&ps, out, path, r)
	blockDevicesToCAPA(ps.BlockDevices, out, path.Child("blockDevices"), r)
	purchasingToCAPA(&ps, out, path, r)
	metadataServiceToCAPA(ps.MetadataServiceOptions, out, path, r)
	return out, mv
}

// instanceToCAPA converts the image and the instance: AMI, type, CPU options, tags and
// instance profile.
func instanceToCAPA(ps *mapiv1.AWSMachineProviderConfig, out *capav1.AWSMachineSpec, path *field.Path, r *convert.Report) {
	ami := path.Child("ami")
	switch {
	case ps.AMI.ARN != nil:
		r.Error(field.Invalid(ami.Child("arn"), *ps.AMI.ARN, "CAPA takes an AMI ID only"))
	case len(ps.AMI.Filters) > 0:
		r.Error(field.Invalid(ami.Child("filters"), filterNames(ps.AMI.Filters), "CAPA takes an AMI ID only; resolve the filters to an ID"))
	case ps.AMI.ID == nil || *ps.AMI.ID == "":
		r.Error(field.Required(ami.Child("id"), "CAPA needs an AMI ID"))
	default:
		out.AMI.ID = ptr.To(*ps.AMI.ID)
	}
	if ps.InstanceType == "" {
		r.Error(field.Required(path.Child("instanceType"), ""))
	}
	out.InstanceType = ps.InstanceType
	if ps.CPUOptions != nil && ps.CPUOptions.ConfidentialCompute != nil {
		switch v := *ps.CPUOptions.ConfidentialCompute; v {
		case mapiv1.AWSConfidentialComputePolicyDisabled, mapiv1.AWSConfidentialComputePolicySEVSNP:
			out.CPUOptions.ConfidentialCompute = capav1.AWSConfidentialComputePolicy(v)
		default:
			r.Error(field.NotSupported(path.Child("cpuOptions", "confidentialCompute"), v, []string{string(mapiv1.AWSConfidentialComputePolicyDisabled), string(mapiv1.AWSConfidentialComputePolicySEVSNP)}))
		}
	}
	out.AdditionalTags = tagsToCAPA(ps.Tags, path.Child("tags"), r)
	if ref := ps.IAMInstanceProfile; ref != nil {
		rp := path.Child("iamInstanceProfile")
		switch {
		case ref.ARN != nil:
			r.Error(field.Invalid(rp.Child("arn"), *ref.ARN, "CAPA takes the instance profile name; use id"))
		case len(ref.Filters) > 0:
			r.Error(field.Invalid(rp.Child("filters"), filterNames(ref.Filters), "CAPA takes the instance profile name; use id"))
		case ref.ID != nil:
			out.IAMInstanceProfile = *ref.ID
		}
	}
}

// secretsToCAPA checks the user data and credentials secrets and converts the SSH key. The
// user data secret becomes the Machine's bootstrap data secret, which it returns.
func (p Platform) secretsToCAPA(ps *mapiv1.AWSMachineProviderConfig, out *capav1.AWSMachineSpec, path *field.Path, r *convert.Report) *string {
	var dataSecret *string
	switch {
	case ps.UserDataSecret == nil || ps.UserDataSecret.Name == "":
		r.Error(field.Required(path.Child("userDataSecret", "name"), "Cluster API Machines need bootstrap data (spec.bootstrap.dataSecretName)"))
	default:
		dataSecret = ptr.To(ps.UserDataSecret.Name)
	}
	switch cs := ps.CredentialsSecret; {
	case cs == nil || cs.Name == "":
		r.Warn(path.Child("credentialsSecret"), "unset; CAPA uses the AWSCluster's identity and converting back sets %s", p.credentialsSecret())
	case cs.Name != p.credentialsSecret():
		r.Error(field.Invalid(path.Child("credentialsSecret", "name"), cs.Name, "CAPA takes credentials from the AWSCluster's identity, one per cluster; this cluster's Machine API credentials secret is "+p.credentialsSecret()))
	}
	out.SSHKeyName = copyString(ps.KeyName)
	return dataSecret
}

// networkToCAPA converts the network interface, security groups and subnet, checks the load
// balancers, and adds what a dual-stack cluster gives every instance. It returns whether the
// load balancers make the Machine a control-plane Machine.
func (p Platform) networkToCAPA(ps *mapiv1.AWSMachineProviderConfig, out *capav1.AWSMachineSpec, path *field.Path, r *convert.Report) bool {
	if ps.DeviceIndex != 0 {
		r.Error(field.Invalid(path.Child("deviceIndex"), ps.DeviceIndex, "CAPA always attaches the primary interface at index 0"))
	}
	out.PublicIP = copyBool(ps.PublicIP)
	switch ps.NetworkInterfaceType {
	case "":
	case mapiv1.AWSENANetworkInterfaceType:
		out.NetworkInterfaceType = capav1.NetworkInterfaceTypeENI
	case mapiv1.AWSEFANetworkInterfaceType:
		out.NetworkInterfaceType = capav1.NetworkInterfaceTypeEFAWithENAInterface
	default:
		r.Error(field.NotSupported(path.Child("networkInterfaceType"), ps.NetworkInterfaceType, []string{"ENA", "EFA"}))
	}
	for i, sg := range ps.SecurityGroups {
		if ref, ok := refToCAPA(sg, path.Child("securityGroups").Index(i), r); ok {
			out.AdditionalSecurityGroups = append(out.AdditionalSecurityGroups, ref)
		}
	}
	if !isZeroRef(ps.Subnet) {
		if ref, ok := refToCAPA(ps.Subnet, path.Child("subnet"), r); ok {
			out.Subnet = &ref
		}
	}
	controlPlane := p.loadBalancersToCAPA(ps.LoadBalancers, path.Child("loadBalancers"), r)
	if isDualStack(p.IPFamily) {
		out.AssignPrimaryIPv6 = ptr.To(capav1.PrimaryIPv6AssignmentStateEnabled)
		out.PrivateDNSName = dualStackDNS()
	}
	return controlPlane
}

// placementToCAPA checks the region against the cluster's and converts tenancy, dedicated
// host and placement group. The availability zone becomes the Machine's failure domain, which
// it returns.
func (p Platform) placementToCAPA(ps *mapiv1.AWSMachineProviderConfig, out *capav1.AWSMachineSpec, path *field.Path, r *convert.Report) string {
	pl := path.Child("placement")
	switch {
	case ps.Placement.Region == "":
		r.Warn(pl.Child("region"), "unset; the cluster's region %s applies", p.Region)
	case ps.Placement.Region != p.Region:
		r.Error(field.Invalid(pl.Child("region"), ps.Placement.Region, "the cluster's region is "+p.Region+" (Infrastructure status.platformStatus.aws.region); CAPA keeps one region per cluster (AWSCluster spec.region), so a Machine in another region cannot be converted"))
	}
	switch t := ps.Placement.Tenancy; t {
	case "", mapiv1.DefaultTenancy, mapiv1.DedicatedTenancy, mapiv1.HostTenancy:
		out.Tenancy = string(t)
	default:
		r.Error(field.NotSupported(pl.Child("tenancy"), t, []string{"default", "dedicated", "host"}))
	}
	hostToCAPA(ps.Placement.Host, out, pl.Child("host"), r)
	out.PlacementGroupName = ps.PlacementGroupName
	if v := ptr.Deref(ps.PlacementGroupPartition, 0); v != 0 {
		if v < 1 || v > 7 {
			r.Error(field.Invalid(path.Child("placementGroupPartition"), v, "partitions are numbered 1 to 7"))
		}
		out.PlacementGroupPartition = int64(v)
	}
	return ps.Placement.AvailabilityZone
}

// purchasingToCAPA converts the spot options, the market type and the capacity reservation.
func purchasingToCAPA(ps *mapiv1.AWSMachineProviderConfig, out *capav1.AWSMachineSpec, path *field.Path, r *convert.Report) {
	if s := ps.SpotMarketOptions; s != nil {
		out.SpotMarketOptions = &capav1.SpotMarketOptions{MaxPrice: copyString(s.MaxPrice)}
	}
	switch m := ps.MarketType; m {
	case "", mapiv1.MarketTypeOnDemand, mapiv1.MarketTypeSpot, mapiv1.MarketTypeCapacityBlock:
		out.MarketType = capav1.MarketType(m)
	default:
		r.Error(field.NotSupported(path.Child("marketType"), m, []string{"OnDemand", "Spot", "CapacityBlock"}))
	}
	if ps.CapacityReservationID != "" {
		out.CapacityReservationID = ptr.To(ps.CapacityReservationID)
	}
}

// metadataServiceToCAPA converts the instance metadata service's token requirement, the one
// thing the Machine API configures of it.
func metadataServiceToCAPA(o mapiv1.MetadataServiceOptions, out *capav1.AWSMachineSpec, path *field.Path, r *convert.Report) {
	switch a := o.Authentication; a {
	case "":
	case mapiv1.MetadataServiceAuthenticationRequired:
		out.InstanceMetadataOptions = metadataOptions(capav1.HTTPTokensStateRequired)
	case mapiv1.MetadataServiceAuthenticationOptional:
		out.InstanceMetadataOptions = metadataOptions(capav1.HTTPTokensStateOptional)
	default:
		r.Error(field.NotSupported(path.Child("metadataServiceOptions", "authentication"), a, []string{"Required", "Optional"}))
	}
}

// CAPA's hostAffinity values.
const (
	hostAffinityDefault = "default"
	hostAffinityHost    = "host"
)

// loadBalancersToCAPA checks a Machine's load balancers, which make it a control-plane Machine
// (the returned value): CAPA registers control-plane Machines with the AWSCluster's load
// balancers, so they must be those.
func (p Platform) loadBalancersToCAPA(lbs []mapiv1.LoadBalancerReference, path *field.Path, r *convert.Report) bool {
	if len(lbs) == 0 {
		return false
	}
	in := make([]LoadBalancer, 0, len(lbs))
	ok := true
	for i, lb := range lbs {
		lp := path.Index(i)
		if lb.Name == "" {
			r.Error(field.Required(lp.Child("name"), ""))
			ok = false
		}
		switch lb.Type {
		case mapiv1.ClassicLoadBalancerType, mapiv1.NetworkLoadBalancerType:
		default:
			r.Error(field.NotSupported(lp.Child("type"), lb.Type, []string{string(mapiv1.ClassicLoadBalancerType), string(mapiv1.NetworkLoadBalancerType)}))
			ok = false
		}
		in = append(in, LoadBalancer{Name: lb.Name, Type: lb.Type})
	}
	known := p.ControlPlaneLoadBalancers
	switch {
	case !ok:
	case known == nil:
		r.Warn(path, "not checked: the AWSCluster is not known here. CAPA registers control-plane Machines with the AWSCluster's "+
			"spec.controlPlaneLoadBalancer and spec.secondaryControlPlaneLoadBalancer, not per Machine; give the AWSCluster (--infrastructure) to check them and to convert the Machine back")
	case !known.sameSet(in):
		detail := "CAPA registers control-plane Machines with the AWSCluster's control-plane load balancers (" + known.String() + "), not per Machine; the Machine's must be the same"
		if len(known.Problems) > 0 {
			detail += "; " + strings.Join(known.Problems, "; ")
		}
		r.Error(field.Invalid(path, LoadBalancers{List: in}.String(), detail))
	case !slices.Equal(in, known.List):
		r.Warn(path, "converting back lists them in the AWSCluster's order: %s", known)
	}
	return true
}

// metadataOptions is CAPA's instance metadata options in the form its CRD defaults produce,
// with only the token requirement chosen (the one thing the Machine API configures).
func metadataOptions(tokens capav1.HTTPTokensState) *capav1.InstanceMetadataOptions {
	return &capav1.InstanceMetadataOptions{
		HTTPEndpoint:            capav1.InstanceMetadataEndpointStateEnabled,
		HTTPProtocolIPv6:        capav1.InstanceMetadataEndpointStateDisabled,
		HTTPPutResponseHopLimit: 1,
		HTTPTokens:              tokens,
		InstanceMetadataTags:    capav1.InstanceMetadataEndpointStateDisabled,
	}
}

func tagsToCAPA(tags []mapiv1.TagSpecification, path *field.Path, r *convert.Report) capav1.Tags {
	if len(tags) == 0 {
		return nil
	}
	out := make(capav1.Tags, len(tags))
	for i, t := range tags {
		p := path.Index(i)
		if t.Name == "" {
			r.Error(field.Required(p.Child("name"), ""))
			continue
		}
		if old, dup := out[t.Name]; dup {
			if old != t.Value {
				r.Error(field.Duplicate(p.Child("name"), t.Name))
			} else {
				r.Warn(p, "repeats tag %q; CAPA keeps tags in a map", t.Name)
			}
			continue
		}
		out[t.Name] = t.Value
	}
	return out
}

func isZeroRef(ref mapiv1.AWSResourceReference) bool {
	return ref.ID == nil && ref.ARN == nil && len(ref.Filters) == 0
}

// refToCAPA converts a resource reference for a subnet or security group. CAPA references
// take an ID or filters, not both, and no ARN.
func refToCAPA(ref mapiv1.AWSResourceReference, path *field.Path, r *convert.Report) (capav1.AWSResourceReference, bool) {
	switch {
	case ref.ARN != nil:
		r.Error(field.Invalid(path.Child("arn"), *ref.ARN, "CAPA references take an id or filters, not an ARN"))
		return capav1.AWSResourceReference{}, false
	case ref.ID != nil && len(ref.Filters) > 0:
		r.Error(field.Forbidden(path, "CAPA references take an id or filters, not both"))
		return capav1.AWSResourceReference{}, false
	case ref.ID != nil:
		return capav1.AWSResourceReference{ID: ptr.To(*ref.ID)}, true
	case len(ref.Filters) > 0:
		out := capav1.AWSResourceReference{Filters: make([]capav1.Filter, len(ref.Filters))}
		for i, f := range ref.Filters {
			out.Filters[i] = capav1.Filter{Name: f.Name, Values: append([]string(nil), f.Values...)}
		}
		return out, true
	default:
		r.Error(field.Required(path, "an id or filters"))
		return capav1.AWSResourceReference{}, false
	}
}

// hostToCAPA converts the dedicated host placement. The AWSMachine always gets a hostAffinity,
// "default" unless the Machine asks for DedicatedHost, as CAPA's CRD defaults it.
func hostToCAPA(h *mapiv1.HostPlacement, out *capav1.AWSMachineSpec, path *field.Path, r *convert.Report) {
	out.HostAffinity = ptr.To(hostAffinityDefault)
	if h == nil {
		return
	}
	switch a := h.Affinity; {
	case a == nil:
		r.Warn(path.Child("affinity"), "unset; read as AnyAvailable, which is CAPA's default hostAffinity")
	case *a == mapiv1.HostAffinityAnyAvailable:
		if h.DedicatedHost == nil {
			r.Warn(path, "AnyAvailable without a dedicatedHost is the default placement; converting back leaves placement.host unset")
		}
	case *a == mapiv1.HostAffinityDedicatedHost:
		out.HostAffinity = ptr.To(hostAffinityHost)
	default:
		r.Error(field.NotSupported(path.Child("affinity"), *a, []string{"AnyAvailable", "DedicatedHost"}))
	}
	d := h.DedicatedHost
	if d == nil {
		return
	}
	dp := path.Child("dedicatedHost")
	switch s := ptr.Deref(d.AllocationStrategy, mapiv1.AllocationStrategyUserProvided); s {
	case mapiv1.AllocationStrategyUserProvided:
		if d.ID == "" {
			r.Error(field.Required(dp.Child("id"), "a UserProvided dedicated host needs an id"))
		} else {
			out.HostID = ptr.To(d.ID)
		}
		if d.DynamicHostAllocation != nil {
			r.Error(field.Forbidden(dp.Child("dynamicHostAllocation"), "only allowed when allocationStrategy is Dynamic"))
		}
	case mapiv1.AllocationStrategyDynamic:
		if d.ID != "" {
			r.Error(field.Forbidden(dp.Child("id"), "CAPA allocates dynamic hosts itself; unset id"))
		}
		out.DynamicHostAllocation = &capav1.DynamicHostAllocationSpec{}
		if dh := d.DynamicHostAllocation; dh != nil && dh.Tags != nil {
			out.DynamicHostAllocation.Tags = map[string]string(tagsToCAPA(*dh.Tags, dp.Child("dynamicHostAllocation", "tags"), r))
		}
	default:
		r.Error(field.NotSupported(dp.Child("allocationStrategy"), s, []string{"UserProvided", "Dynamic"}))
	}
}

// blockDevicesToCAPA splits the Machine API block devices into CAPA's root volume (the
// device without a name, which the Machine API maps to the AMI's root device) and the
// non-root volumes, which keep their order.
func blockDevicesToCAPA(devs []mapiv1.BlockDeviceMappingSpec, out *capav1.AWSMachineSpec, path *field.Path, r *convert.Report) {
	for i, bd := range devs {
		p := path.Index(i)
		if bd.NoDevice != nil {
			r.Error(field.Invalid(p.Child("noDevice"), *bd.NoDevice, "CAPA cannot suppress AMI block device mappings"))
		}
		if bd.VirtualName != nil {
			r.Error(field.Invalid(p.Child("virtualName"), *bd.VirtualName, "CAPA has no instance store volumes"))
		}
		if bd.EBS == nil {
			if bd.NoDevice == nil && bd.VirtualName == nil {
				r.Error(field.Required(p.Child("ebs"), "CAPA volumes are EBS volumes"))
			}
			continue
		}
		v, ok := ebsToCAPA(bd.EBS, p.Child("ebs"), r)
		if !ok {
			continue
		}
		if bd.DeviceName == nil {
			if out.RootVolume != nil {
				r.Error(field.Duplicate(p.Child("deviceName"), "<root>"))
				continue
			}
			out.RootVolume = &v
			continue
		}
		if *bd.DeviceName == "" {
			r.Error(field.Required(p.Child("deviceName"), "non-root volumes need a device name"))
			continue
		}
		v.DeviceName = *bd.DeviceName
		out.NonRootVolumes = append(out.NonRootVolumes, v)
	}
}

func ebsToCAPA(e *mapiv1.EBSBlockDeviceSpec, path *field.Path, r *convert.Report) (capav1.Volume, bool) {
	var v capav1.Volume
	ok := true
	if e.DeprecatedDeleteOnTermination != nil { //nolint:staticcheck // read only to report that it is dropped
		r.Warn(path.Child("deleteOnTermination"), "dropped: it has no effect in the Machine API, and CAPA deletes volumes with the instance")
	}
	switch {
	case e.VolumeSize == nil:
		r.Error(field.Required(path.Child("volumeSize"), "CAPA volumes need an explicit size"))
		ok = false
	case *e.VolumeSize < minVolumeSize:
		r.Error(field.Invalid(path.Child("volumeSize"), *e.VolumeSize, "CAPA volumes are at least 8 GiB"))
		ok = false
	default:
		v.Size = *e.VolumeSize
	}
	if e.VolumeType != nil {
		v.Type = capav1.VolumeType(*e.VolumeType)
	}
	if e.Iops != nil {
		if *e.Iops < 0 {
			r.Error(field.Invalid(path.Child("iops"), *e.Iops, "must not be negative"))
			ok = false
		}
		v.IOPS = *e.Iops
	}
	if e.ThroughputMib != nil {
		if *e.ThroughputMib < 0 {
			r.Error(field.Invalid(path.Child("throughputMib"), *e.ThroughputMib, "must not be negative"))
			ok = false
		}
		v.Throughput = ptr.To(int64(*e.ThroughputMib))
	}
	v.Encrypted = copyBool(e.Encrypted)
	k := e.KMSKey
	kp := path.Child("kmsKey")
	switch {
	case len(k.Filters) > 0:
		r.Error(field.Invalid(kp.Child("filters"), filterNames(k.Filters), "CAPA takes a KMS key ID or ARN"))
		ok = false
	case k.ID != nil && k.ARN != nil:
		r.Error(field.Forbidden(kp, "set id or arn, not both"))
		ok = false
	case k.ARN != nil:
		v.EncryptionKey = *k.ARN
	case k.ID != nil:
		v.EncryptionKey = *k.ID
		if isARN(*k.ID) {
			r.Warn(kp.Child("id"), "holds an ARN; converting back puts it in kmsKey.arn")
		}
	}
	return v, ok
}

func filterNames(fs []mapiv1.Filter) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	return out
}

func copyString(p *string) *string {
	if p == nil {
		return nil
	}
	return ptr.To(*p)
}

func copyBool(p *bool) *bool {
	if p == nil {
		return nil
	}
	return ptr.To(*p)
}
