package awsactuator_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/machina-dev/machina/internal/controllers/aws/awsactuator"
	"github.com/machina-dev/machina/internal/controllers/machineapi/machine"
)

// TestProviderSpecInvalid: providerSpecs RunInstances cannot be built from are terminal
// InvalidConfiguration errors naming the field.
func TestProviderSpecInvalid(t *testing.T) {
	valid := func() *machinev1beta1.AWSMachineProviderConfig {
		return &machinev1beta1.AWSMachineProviderConfig{AMI: machinev1beta1.AWSResourceReference{ID: ptr.To("ami-1")},
			InstanceType: "m6i.xlarge", Placement: machinev1beta1.Placement{Region: "us-east-1", AvailabilityZone: "us-east-1a"}}
	}
	for name, c := range map[string]struct {
		edit func(*machinev1beta1.AWSMachineProviderConfig)
		path string
	}{
		"valid":           {edit: func(*machinev1beta1.AWSMachineProviderConfig) {}},
		"no ami":          {func(ps *machinev1beta1.AWSMachineProviderConfig) { ps.AMI = machinev1beta1.AWSResourceReference{} }, "value.ami"},
		"ami arn":         {func(ps *machinev1beta1.AWSMachineProviderConfig) { ps.AMI.ARN = ptr.To("arn:aws:ec2:::image/ami-1") }, "value.ami.arn"},
		"no subnet, zone": {func(ps *machinev1beta1.AWSMachineProviderConfig) { ps.Placement.AvailabilityZone = "" }, "value.subnet"},
		"dynamic host": {func(ps *machinev1beta1.AWSMachineProviderConfig) {
			ps.Placement.Host = &machinev1beta1.HostPlacement{DedicatedHost: &machinev1beta1.DedicatedHost{
				AllocationStrategy: ptr.To(machinev1beta1.AllocationStrategyDynamic)}}
		}, "value.placement.host.dedicatedHost.allocationStrategy"},
		"kms without encryption": {func(ps *machinev1beta1.AWSMachineProviderConfig) {
			ps.BlockDevices = []machinev1beta1.BlockDeviceMappingSpec{{EBS: &machinev1beta1.EBSBlockDeviceSpec{
				KMSKey: machinev1beta1.AWSResourceReference{ID: ptr.To("key")}}}}
		}, "value.blockDevices[0].ebs.kmsKey"},
		"throughput on gp2": {func(ps *machinev1beta1.AWSMachineProviderConfig) {
			ps.BlockDevices = []machinev1beta1.BlockDeviceMappingSpec{{EBS: &machinev1beta1.EBSBlockDeviceSpec{
				VolumeType: ptr.To("gp2"), ThroughputMib: ptr.To[int32](200)}}}
		}, "value.blockDevices[0].ebs.throughputMib"},
		"spot and reservation": {func(ps *machinev1beta1.AWSMachineProviderConfig) {
			ps.MarketType, ps.CapacityReservationID = machinev1beta1.MarketTypeSpot, "cr-1"
		}, "value.capacityReservationId"},
		"partition without group": {func(ps *machinev1beta1.AWSMachineProviderConfig) { ps.PlacementGroupPartition = ptr.To[int32](2) },
			"value.placementGroupName"},
		"load balancer type": {func(ps *machinev1beta1.AWSMachineProviderConfig) {
			ps.LoadBalancers = []machinev1beta1.LoadBalancerReference{{Name: "lb", Type: "application"}}
		}, "value.loadBalancers[0].type"},
	} {
		t.Run(name, func(t *testing.T) {
			ps := valid()
			c.edit(ps)
			raw, err := json.Marshal(ps)
			if err != nil {
				t.Fatal(err)
			}
			m := &machinev1beta1.Machine{Spec: machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: raw}}}}
			_, err = awsactuator.ProviderSpec(m)
			if c.path == "" {
				if err != nil {
					t.Fatalf("valid providerSpec refused: %v", err)
				}
				return
			}
			var term *machine.TerminalError
			if !errors.As(err, &term) || term.Reason != machinev1beta1.InvalidConfigurationMachineError ||
				!strings.Contains(term.Message, "spec.providerSpec."+c.path) {
				t.Errorf("error %v, want InvalidConfiguration naming spec.providerSpec.%s", err, c.path)
			}
		})
	}
}
