package openstack_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	capov1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1" //nolint:staticcheck // CAPO v1beta1 keeps its conditions in this type
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/convert/providers/openstack"
)

func TestDescribeInstance(t *testing.T) {
	ready := func(status corev1.ConditionStatus, reason string) clusterv1beta1.Conditions {
		return clusterv1beta1.Conditions{{Type: capov1.InstanceReadyCondition, Status: status, Reason: reason}}
	}
	for _, tc := range []struct {
		name          string
		flavor        *string
		identity      *capov1.OpenStackIdentityReference
		failureDomain string
		conditions    clusterv1beta1.Conditions
		wantLabels    map[string]string
		wantState     string
	}{
		{name: "no server yet", flavor: ptr.To("m1.xlarge"), failureDomain: "nova-az1",
			conditions: ready(corev1.ConditionFalse, "WaitingForBootstrapData"),
			wantLabels: map[string]string{convert.MachineAPIInstanceTypeLabel: "m1.xlarge", convert.MachineAPIZoneLabel: "nova-az1"}},
		{name: "active, region from the identity", flavor: ptr.To("m1.xlarge"), failureDomain: "nova-az1",
			identity:   &capov1.OpenStackIdentityReference{Name: "openstack-cloud-credentials", CloudName: "openstack", Region: "RegionOne"},
			conditions: ready(corev1.ConditionTrue, ""),
			wantLabels: map[string]string{convert.MachineAPIInstanceTypeLabel: "m1.xlarge", convert.MachineAPIRegionLabel: "RegionOne", convert.MachineAPIZoneLabel: "nova-az1"},
			wantState:  "ACTIVE"},
		{name: "error, zone left to Nova", flavor: ptr.To("m1.xlarge"),
			identity:   &capov1.OpenStackIdentityReference{Name: "openstack-cloud-credentials", CloudName: "openstack"},
			conditions: ready(corev1.ConditionFalse, capov1.InstanceStateErrorReason),
			wantLabels: map[string]string{convert.MachineAPIInstanceTypeLabel: "m1.xlarge"}, wantState: "ERROR"},
		{name: "shut off: not told", failureDomain: "nova-az1",
			conditions: ready(corev1.ConditionUnknown, capov1.InstanceNotReadyReason),
			wantLabels: map[string]string{convert.MachineAPIZoneLabel: "nova-az1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			om := &capov1.OpenStackMachine{Spec: capov1.OpenStackMachineSpec{Flavor: tc.flavor, IdentityRef: tc.identity}}
			om.Status.Conditions = tc.conditions
			m := &clusterv1.Machine{Spec: clusterv1.MachineSpec{FailureDomain: tc.failureDomain}}
			v, ok := convert.DescribeInstance(openstack.New(), om, m)
			if !ok {
				t.Fatal("openstack describes no instance")
			}
			if len(v.Labels) != len(tc.wantLabels) {
				t.Errorf("labels %v, want %v", v.Labels, tc.wantLabels)
			}
			for k, val := range tc.wantLabels {
				if v.Labels[k] != val {
					t.Errorf("label %s = %q, want %q", k, v.Labels[k], val)
				}
			}
			if v.State != tc.wantState || v.ProviderStatus != nil {
				t.Errorf("state %q providerStatus %v, want %q and none", v.State, v.ProviderStatus, tc.wantState)
			}
		})
	}
	if v := openstack.New().DescribeInstance(&capov1.OpenStackMachineTemplate{}, &clusterv1.Machine{}); len(v.Labels) != 0 || v.State != "" || v.ProviderStatus != nil {
		t.Errorf("view of an OpenStackMachineTemplate: %+v, want none", v)
	}
}
