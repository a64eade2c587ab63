package platform_test

import (
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/utils/ptr"
	capav1 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"

	simv1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/convert/providers/aws"
	"github.com/machina-dev/machina/internal/convert/providers/sim"
	"github.com/machina-dev/machina/internal/platform"
)

func TestRegionalGivesNoPlatformOnError(t *testing.T) {
	newPlatform := platform.Regional(aws.New)
	if p, err := newPlatform(""); err == nil || p != nil {
		t.Errorf("without a region: %#v, %v; want no platform and an error", p, err)
	}
	if p, err := newPlatform("us-east-1"); err != nil || p.(aws.Platform).Region != "us-east-1" {
		t.Errorf("in us-east-1: %#v, %v", p, err)
	}
}

func TestApplyWith(t *testing.T) {
	infra := &configv1.Infrastructure{Status: configv1.InfrastructureStatus{PlatformStatus: &configv1.PlatformStatus{
		Type: configv1.AWSPlatformType, AWS: &configv1.AWSPlatformStatus{Region: "us-east-1", IPFamily: configv1.DualStackIPv4Primary}}}}
	cluster := &capav1.AWSCluster{}
	cluster.Spec.ControlPlaneLoadBalancer = &capav1.AWSLoadBalancerSpec{Name: ptr.To("cp")}
	apply := platform.ApplyWith(aws.Platform.WithInfrastructure, aws.Platform.WithAWSCluster)
	p := aws.Platform{Region: "us-east-1"}

	if got := apply(p, infra).(aws.Platform); got.IPFamily != configv1.DualStackIPv4Primary {
		t.Errorf("the Infrastructure's ipFamily was not applied: %+v", got)
	}
	if got := apply(p, cluster).(aws.Platform); got.ControlPlaneLoadBalancers == nil {
		t.Errorf("the AWSCluster's load balancers were not applied: %+v", got)
	}
	if got := apply(p, &simv1.SimCluster{}); got != p {
		t.Errorf("another platform's InfraCluster changed the platform: %+v", got)
	}
	other := sim.Platform{Region: "sim-east-1"}
	if got := apply(other, infra); got != other {
		t.Errorf("another platform was changed: %+v", got)
	}
	// Without withInfra, the Infrastructure adds nothing.
	clusterOnly := platform.ApplyWith(nil, aws.Platform.WithAWSCluster)
	if got := clusterOnly(p, infra); got != p {
		t.Errorf("the Infrastructure changed the platform: %+v", got)
	}
}
