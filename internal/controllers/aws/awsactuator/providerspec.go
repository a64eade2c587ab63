package awsactuator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/machina-dev/machina/internal/controllers/machineapi/machine"
)

// specPath is where a Machine keeps its providerSpec.
var specPath = field.NewPath("spec", "providerSpec", "value")

// ProviderSpecKind is the providerSpec kind this actuator provisions.
const ProviderSpecKind = "AWSMachineProviderConfig"

// ProviderSpec decodes and checks a Machine's AWSMachineProviderConfig. Problems are
// InvalidConfiguration errors naming the field.
func ProviderSpec(m *machinev1beta1.Machine) (*machinev1beta1.AWSMachineProviderConfig, error) {
	v := m.Spec.ProviderSpec.Value
	if v == nil || (len(v.Raw) == 0 && v.Object == nil) {
		return nil, machine.InvalidConfiguration("%s: Required value: an %s is needed", specPath, ProviderSpecKind)
	}
	raw := v.Raw
	if raw == nil {
		var err error
		if raw, err = json.Marshal(v.Object); err != nil {
			return nil, machine.InvalidConfiguration("%s: %v", specPath, err)
		}
	}
	ps := &machinev1beta1.AWSMachineProviderConfig{}
	if err := json.NewDecoder(bytes.NewReader(raw)).Decode(ps); err != nil {
		return nil, machine.InvalidConfiguration("%s: not an %s: %v", specPath, ProviderSpecKind, err)
	}
	if ps.Kind != "" && ps.Kind != ProviderSpecKind {
		return nil, machine.InvalidConfiguration("%s: Unsupported value: %q: supported values: %q", specPath.Child("kind"), ps.Kind, ProviderSpecKind)
	}
	if errs := validate(ps); len(errs) > 0 {
		return nil, machine.InvalidConfiguration("%s", errs.ToAggregate().Error())
	}
	return ps, nil
}

// validate checks what RunInstances cannot be built without, field by field.
func validate(ps *machinev1beta1.AWSMachineProviderConfig) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateAMI(ps.AMI, specPath.Child("ami"))...)
	if ps.InstanceType == "" {
		errs = append(errs, field.Required(specPath.Child("instanceType"), "the EC2 instance type"))
	}
	if isZeroRef(ps.Subnet) && ps.Placement.AvailabilityZone == "" {
		errs = append(errs, field.Required(specPath.Child("subnet"), "a subnet (id, arn or filters) or placement.availabilityZone"))
	}
	if ps.Subnet.ARN != nil {
		if _, err := subnetIDFromARN(*ps.Subnet.ARN); err != nil {
			errs = append(errs, field.Invalid(specPath.Child("subnet", "arn"), *ps.Subnet.ARN, err.Error()))
		}
	}
	for i, sg := range ps.SecurityGroups {
		p := specPath.Child("securityGroups").Index(i)
		if sg.ARN != nil {
			errs = append(errs, field.Invalid(p.Child("arn"), *sg.ARN, "security groups are selected by id or filters"))
		} else if isZeroRef(sg) {
			errs = append(errs, field.Required(p, "an id or filters"))
		}
	}
	if ref := ps.IAMInstanceProfile; ref != nil && len(ref.Filters) > 0 {
		errs = append(errs, field.Invalid(specPath.Child("iamInstanceProfile", "filters"), filterNames(ref.Filters), "an instance profile is named by id or arn"))
	}
	for i, lb := range ps.LoadBalancers {
		p := specPath.Child("loadBalancers").Index(i)
		if lb.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		}
		if lb.Type != machinev1beta1.ClassicLoadBalancerType && lb.Type != machinev1beta1.NetworkLoadBalancerType {
			errs = append(errs, field.NotSupported(p.Child("type"), lb.Type, []string{string(machinev1beta1.ClassicLoadBalancerType), string(machinev1beta1.NetworkLoadBalancerType)}))
		}
	}
	errs = append(errs, validateBlockDevices(ps.BlockDevices)...)
	errs = append(errs, validateMarket(ps)...)
	errs = append(errs, validatePlacement(ps)...)
	switch ps.MetadataServiceOptions.Authentication {
	case "", machinev1beta1.MetadataServiceAuthenticationOptional, machinev1beta1.MetadataServiceAuthenticationRequired:
	default:
		errs = append(errs, field.NotSupported(specPath.Child("metadataServiceOptions", "authentication"), ps.MetadataServiceOptions.Authentication,
			[]string{machinev1beta1.MetadataServiceAuthenticationOptional, machinev1beta1.MetadataServiceAuthenticationRequired}))
	}
	switch ps.NetworkInterfaceType {
	case "", machinev1beta1.AWSENANetworkInterfaceType, machinev1beta1.AWSEFANetworkInterfaceType:
	default:
		errs = append(errs, field.NotSupported(specPath.Child("networkInterfaceType"), ps.NetworkInterfaceType,
			[]string{string(machinev1beta1.AWSENANetworkInterfaceType), string(machinev1beta1.AWSEFANetworkInterfaceType)}))
	}
	if ps.DeviceIndex < 0 || ps.DeviceIndex > 31 {
		errs = append(errs, field.Invalid(specPath.Child("deviceIndex"), ps.DeviceIndex, "must be from 0 to 31"))
	}
	return errs
}

func validateAMI(ref machinev1beta1.AWSResourceReference, p *field.Path) field.ErrorList {
	switch {
	case ref.ARN != nil:
		return field.ErrorList{field.Invalid(p.Child("arn"), *ref.ARN, "an AMI cannot be selected by ARN; use ami.id or ami.filters")}
	case ref.ID == nil && len(ref.Filters) == 0:
		return field.ErrorList{field.Required(p, "an AMI id or filters")}
	}
	return nil
}

var volumeTypes = []string{"gp2", "gp3", "io1", "io2", "st1", "sc1", "standard"}

func validateBlockDevices(devs []machinev1beta1.BlockDeviceMappingSpec) field.ErrorList {
	var errs field.ErrorList
	roots := 0
	for i, d := range devs {
		p := specPath.Child("blockDevices").Index(i)
		if d.DeviceName == nil {
			roots++
		}
		if d.EBS == nil {
			if d.NoDevice == nil && d.VirtualName == nil {
				errs = append(errs, field.Required(p.Child("ebs"), "an EBS volume"))
			}
			continue
		}
		errs = append(errs, validateEBS(d.EBS, p.Child("ebs"))...)
	}
	if roots > 1 {
		errs = append(errs, field.Invalid(specPath.Child("blockDevices"), roots, "at most one device without deviceName (the root volume)"))
	}
	return errs
}

func validateEBS(e *machinev1beta1.EBSBlockDeviceSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	vt := ptr.Deref(e.VolumeType, "")
	if vt != "" && !slices.Contains(volumeTypes, vt) {
		errs = append(errs, field.NotSupported(p.Child("volumeType"), vt, volumeTypes))
	}
	if e.Iops != nil && *e.Iops != 0 && !slices.Contains([]string{"io1", "io2", "gp3"}, vt) {
		errs = append(errs, field.Invalid(p.Child("iops"), *e.Iops, "IOPS can be set for volume types io1, io2 and gp3 only"))
	}
	if e.ThroughputMib != nil && vt != "gp3" {
		errs = append(errs, field.Invalid(p.Child("throughputMib"), *e.ThroughputMib, "throughput can be set for volume type gp3 only"))
	}
	if e.VolumeSize != nil && (*e.VolumeSize < 1 || *e.VolumeSize > 65536) {
		errs = append(errs, field.Invalid(p.Child("volumeSize"), *e.VolumeSize, "must be from 1 to 65536 GiB"))
	}
	if len(e.KMSKey.Filters) > 0 {
		errs = append(errs, field.Invalid(p.Child("kmsKey", "filters"), filterNames(e.KMSKey.Filters), "a KMS key is named by id or arn"))
	}
	if !isZeroRef(e.KMSKey) && !ptr.Deref(e.Encrypted, false) {
		errs = append(errs, field.Invalid(p.Child("kmsKey"), kmsKeyID(e.KMSKey), "a KMS key needs encrypted: true"))
	}
	return errs
}

func validateMarket(ps *machinev1beta1.AWSMachineProviderConfig) field.ErrorList {
	var errs field.ErrorList
	p := specPath.Child("marketType")
	switch ps.MarketType {
	case "", machinev1beta1.MarketTypeOnDemand:
		if ps.MarketType != "" && ps.SpotMarketOptions != nil {
			errs = append(errs, field.Invalid(p, ps.MarketType, "spotMarketOptions need marketType Spot (or none)"))
		}
	case machinev1beta1.MarketTypeSpot:
	case machinev1beta1.MarketTypeCapacityBlock:
		if ps.CapacityReservationID == "" {
			errs = append(errs, field.Required(specPath.Child("capacityReservationId"), "marketType CapacityBlock needs a capacity reservation"))
		}
		if ps.SpotMarketOptions != nil {
			errs = append(errs, field.Invalid(p, ps.MarketType, "spotMarketOptions need marketType Spot (or none)"))
		}
	default:
		errs = append(errs, field.NotSupported(p, ps.MarketType, []string{string(machinev1beta1.MarketTypeOnDemand),
			string(machinev1beta1.MarketTypeSpot), string(machinev1beta1.MarketTypeCapacityBlock)}))
	}
	if spot(ps) && ps.CapacityReservationID != "" {
		errs = append(errs, field.Invalid(specPath.Child("capacityReservationId"), ps.CapacityReservationID, "a spot instance cannot use a capacity reservation"))
	}
	if id := ps.CapacityReservationID; id != "" && !strings.HasPrefix(id, "cr-") {
		errs = append(errs, field.Invalid(specPath.Child("capacityReservationId"), id, "a capacity reservation ID starts with cr-"))
	}
	return errs
}

func validatePlacement(ps *machinev1beta1.AWSMachineProviderConfig) field.ErrorList {
	var errs field.ErrorList
	p := specPath.Child("placement")
	switch ps.Placement.Tenancy {
	case "", machinev1beta1.DefaultTenancy, machinev1beta1.DedicatedTenancy, machinev1beta1.HostTenancy:
	default:
		errs = append(errs, field.NotSupported(p.Child("tenancy"), ps.Placement.Tenancy, []string{string(machinev1beta1.DefaultTenancy),
			string(machinev1beta1.DedicatedTenancy), string(machinev1beta1.HostTenancy)}))
	}
	if n := ps.PlacementGroupPartition; n != nil {
		if ps.PlacementGroupName == "" {
			errs = append(errs, field.Required(specPath.Child("placementGroupName"), "placementGroupPartition needs a placement group"))
		}
		if *n < 1 || *n > 7 {
			errs = append(errs, field.Invalid(specPath.Child("placementGroupPartition"), *n, "must be from 1 to 7"))
		}
	}
	if h := ps.Placement.Host; h != nil {
		hp := p.Child("host", "dedicatedHost")
		if dh := h.DedicatedHost; dh != nil {
			if ptr.Deref(dh.AllocationStrategy, machinev1beta1.AllocationStrategyUserProvided) == machinev1beta1.AllocationStrategyDynamic {
				errs = append(errs, field.NotSupported(hp.Child("allocationStrategy"), *dh.AllocationStrategy, []string{string(machinev1beta1.AllocationStrategyUserProvided)}))
			} else if dh.ID == "" {
				errs = append(errs, field.Required(hp.Child("id"), "the dedicated host's ID"))
			}
		}
		if ptr.Deref(h.Affinity, "") == machinev1beta1.HostAffinityDedicatedHost && h.DedicatedHost == nil {
			errs = append(errs, field.Required(hp, "affinity DedicatedHost needs a dedicated host"))
		}
	}
	return errs
}

// ProviderStatus decodes a Machine's AWSMachineProviderStatus (nil when unset).
func ProviderStatus(m *machinev1beta1.Machine) (*machinev1beta1.AWSMachineProviderStatus, error) {
	if m.Status.ProviderStatus == nil || len(m.Status.ProviderStatus.Raw) == 0 {
		return nil, nil
	}
	st := &machinev1beta1.AWSMachineProviderStatus{}
	return st, json.Unmarshal(m.Status.ProviderStatus.Raw, st)
}

func setProviderStatus(m *machinev1beta1.Machine, st *machinev1beta1.AWSMachineProviderStatus) {
	st.APIVersion, st.Kind = machinev1beta1.GroupVersion.String(), "AWSMachineProviderStatus"
	raw, _ := json.Marshal(st) // a plain struct always marshals
	m.Status.ProviderStatus = &runtime.RawExtension{Raw: raw}
}

func isZeroRef(r machinev1beta1.AWSResourceReference) bool {
	return r.ID == nil && r.ARN == nil && len(r.Filters) == 0
}

func spot(ps *machinev1beta1.AWSMachineProviderConfig) bool {
	return ps.MarketType == machinev1beta1.MarketTypeSpot || ps.SpotMarketOptions != nil
}

func kmsKeyID(r machinev1beta1.AWSResourceReference) string {
	if r.ARN != nil {
		return *r.ARN
	}
	return ptr.Deref(r.ID, "")
}

// subnetIDFromARN reads arn:aws:ec2:<region>:<account>:subnet/<subnet-id>.
func subnetIDFromARN(arn string) (string, error) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "ec2" {
		return "", fmt.Errorf("not an EC2 ARN (arn:aws:ec2:<region>:<account>:subnet/<id>)")
	}
	id, ok := strings.CutPrefix(parts[5], "subnet/")
	if !ok || !strings.HasPrefix(id, "subnet-") {
		return "", fmt.Errorf("not a subnet ARN (…:subnet/subnet-…)")
	}
	return id, nil
}

func filterNames(fs []machinev1beta1.Filter) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.Name
	}
	return strings.Join(names, ",")
}
