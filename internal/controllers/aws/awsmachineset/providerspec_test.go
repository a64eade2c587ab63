package awsmachineset

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/machina-dev/machina/internal/cloud/api"
)

func TestCapacityOf(t *testing.T) {
	gpu := types.InstanceTypeInfo{InstanceType: "p4d.24xlarge",
		VCpuInfo:      &types.VCpuInfo{DefaultVCpus: aws.Int32(96)},
		MemoryInfo:    &types.MemoryInfo{SizeInMiB: aws.Int64(1179648)},
		GpuInfo:       &types.GpuInfo{Gpus: []types.GpuDeviceInfo{{Count: aws.Int32(4)}, {Count: aws.Int32(4)}}},
		ProcessorInfo: &types.ProcessorInfo{SupportedArchitectures: []types.ArchitectureType{types.ArchitectureTypeX8664}}}
	want := api.InstanceType{Name: "p4d.24xlarge", VCPU: 96, MemoryMiB: 1179648, GPU: 8, Architecture: "amd64"}
	if got := capacityOf(gpu); got != want {
		t.Errorf("capacityOf(gpu) = %+v, want %+v", got, want)
	}
	arm := types.InstanceTypeInfo{InstanceType: "m6g.xlarge", VCpuInfo: &types.VCpuInfo{DefaultVCpus: aws.Int32(4)},
		ProcessorInfo: &types.ProcessorInfo{SupportedArchitectures: []types.ArchitectureType{types.ArchitectureTypeArm64}}}
	if got := capacityOf(arm); got.Architecture != "arm64" || got.VCPU != 4 || got.MemoryMiB != 0 {
		t.Errorf("capacityOf(arm) = %+v", got)
	}
	if got := capacityOf(types.InstanceTypeInfo{InstanceType: "x"}); got != (api.InstanceType{Name: "x", Architecture: "amd64"}) {
		t.Errorf("capacityOf(empty) = %+v", got)
	}
}

func TestIsInvalidInstanceType(t *testing.T) {
	wrapped := errors.Join(errors.New("operation error EC2"), &smithy.GenericAPIError{Code: "InvalidInstanceType"})
	if !IsInvalidInstanceType(wrapped) {
		t.Error("a wrapped InvalidInstanceType API error was not recognised")
	}
	if IsInvalidInstanceType(&smithy.GenericAPIError{Code: "RequestLimitExceeded"}) || IsInvalidInstanceType(errors.New("InvalidInstanceType")) {
		t.Error("only EC2's InvalidInstanceType answer counts")
	}
}

func TestProviderSpec(t *testing.T) {
	cases := []struct {
		name    string
		raw     string
		aws     bool
		wantErr bool
		itype   string
	}{
		{"none", "", false, false, ""},
		{"aws", `{"apiVersion":"machine.openshift.io/v1beta1","kind":"AWSMachineProviderConfig","instanceType":"m6i.xlarge"}`, true, false, "m6i.xlarge"},
		{"legacy group", `{"apiVersion":"awsproviderconfig.openshift.io/v1beta1","kind":"AWSMachineProviderConfig","instanceType":"m5.large"}`, true, false, "m5.large"},
		{"no apiVersion", `{"kind":"AWSMachineProviderConfig","instanceType":"m5.large"}`, true, false, "m5.large"},
		{"no kind", `{"instanceType":"m5.large","placement":{"region":"us-east-1"}}`, false, false, ""},
		{"sim", `{"apiVersion":"infrastructure.machina.dev/v1alpha1","kind":"SimMachineProviderSpec","instanceType":"s1.large"}`, false, false, ""},
		{"other group", `{"apiVersion":"example.com/v1","kind":"AWSMachineProviderConfig"}`, false, false, ""},
		{"wrong field type", `{"kind":"AWSMachineProviderConfig","instanceType":7}`, true, true, ""},
		{"not an object", `"text"`, false, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ms := &machinev1beta1.MachineSet{}
			if tc.raw != "" {
				ms.Spec.Template.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: json.RawMessage(tc.raw)}
			}
			ps, isAWS, err := providerSpec(ms)
			if isAWS != tc.aws || (err != nil) != tc.wantErr {
				t.Fatalf("aws=%v err=%v, want aws=%v err=%v", isAWS, err, tc.aws, tc.wantErr)
			}
			if tc.itype != "" && (ps == nil || ps.InstanceType != tc.itype) {
				t.Fatalf("providerSpec %+v, want instanceType %s", ps, tc.itype)
			}
		})
	}
}
