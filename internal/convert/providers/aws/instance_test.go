package aws_test

import (
	"testing"

	"k8s.io/utils/ptr"
	capav1 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/convert/providers/aws"
)

func TestDescribeInstance(t *testing.T) {
	p := aws.Platform{Region: "us-east-1"}
	m := &clusterv1.Machine{Spec: clusterv1.MachineSpec{FailureDomain: "us-east-1c"}}
	am := &capav1.AWSMachine{Spec: capav1.AWSMachineSpec{InstanceType: "m6i.xlarge", InstanceID: ptr.To("i-0abc")}}
	am.Status.InstanceState = ptr.To(capav1.InstanceStateRunning)
	v, ok := convert.DescribeInstance(p, am, m)
	if !ok {
		t.Fatal("aws describes no instance")
	}
	if v.Labels[convert.MachineAPIInstanceTypeLabel] != "m6i.xlarge" || v.Labels[convert.MachineAPIRegionLabel] != "us-east-1" ||
		v.Labels[convert.MachineAPIZoneLabel] != "us-east-1c" || v.State != "running" {
		t.Errorf("view %+v", v)
	}
	if v.ProviderStatus == nil ||
		string(v.ProviderStatus.Raw) != `{"kind":"AWSMachineProviderStatus","apiVersion":"machine.openshift.io/v1beta1","instanceId":"i-0abc","instanceState":"running"}` {
		t.Errorf("providerStatus %v", v.ProviderStatus)
	}
}
