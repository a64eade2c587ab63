package powervs_test

import (
	"testing"

	"k8s.io/utils/ptr"
	capibmv1 "sigs.k8s.io/cluster-api-provider-ibmcloud/api/powervs/v1beta3"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/convert/providers/powervs"
)

func TestDescribeInstance(t *testing.T) {
	const workspace = "5094c532-89b9-4c28-82ea-00e71be200c6"
	const instance = "0d5f1d0e-7f52-4b3e-9c0d-6a1e2f3b4c5d"
	withStatus := func(pm *capibmv1.IBMPowerVSMachine) {
		pm.Status.Region, pm.Status.Zone = ptr.To("dal"), ptr.To("dal10")
	}
	for _, tc := range []struct {
		name       string
		set        func(*capibmv1.IBMPowerVSMachine)
		wantLabels map[string]string
		wantState  string
		wantStatus string // the providerStatus JSON, "" for none
	}{
		{name: "no instance, workspace by name",
			set: func(pm *capibmv1.IBMPowerVSMachine) {
				pm.Spec.ServiceInstance = &capibmv1.IBMPowerVSResourceReference{Name: ptr.To("ci-workspace")}
			},
			wantLabels: map[string]string{convert.MachineAPIInstanceTypeLabel: "s922"}},
		{name: "no instance, workspace by ID",
			set: func(pm *capibmv1.IBMPowerVSMachine) {
				pm.Spec.ServiceInstance = &capibmv1.IBMPowerVSResourceReference{ID: ptr.To(workspace)}
				withStatus(pm)
			},
			wantLabels: map[string]string{convert.MachineAPIInstanceTypeLabel: "s922", convert.MachineAPIRegionLabel: "dal", convert.MachineAPIZoneLabel: "dal10"},
			wantStatus: `{"kind":"PowerVSMachineProviderStatus","apiVersion":"machine.openshift.io/v1","serviceInstanceID":"` + workspace + `"}`},
		{name: "active, workspace from the providerID",
			set: func(pm *capibmv1.IBMPowerVSMachine) {
				withStatus(pm)
				pm.Spec.ProviderID = "ibmpowervs://dal/dal10/" + workspace + "/" + instance
				pm.Status.InstanceID, pm.Status.InstanceState = instance, capibmv1.PowerVSInstanceStateACTIVE
			},
			wantLabels: map[string]string{convert.MachineAPIInstanceTypeLabel: "s922", convert.MachineAPIRegionLabel: "dal", convert.MachineAPIZoneLabel: "dal10"},
			wantState:  "ACTIVE",
			wantStatus: `{"kind":"PowerVSMachineProviderStatus","apiVersion":"machine.openshift.io/v1","instanceId":"` + instance + `","serviceInstanceID":"` + workspace + `","instanceState":"ACTIVE"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pm := &capibmv1.IBMPowerVSMachine{Spec: capibmv1.IBMPowerVSMachineSpec{SystemType: "s922"}}
			tc.set(pm)
			v, ok := convert.DescribeInstance(powervs.New(), pm, &clusterv1.Machine{})
			if !ok {
				t.Fatal("powervs describes no instance")
			}
			if len(v.Labels) != len(tc.wantLabels) {
				t.Errorf("labels %v, want %v", v.Labels, tc.wantLabels)
			}
			for k, val := range tc.wantLabels {
				if v.Labels[k] != val {
					t.Errorf("label %s = %q, want %q", k, v.Labels[k], val)
				}
			}
			if v.State != tc.wantState {
				t.Errorf("state %q, want %q", v.State, tc.wantState)
			}
			switch {
			case tc.wantStatus == "" && v.ProviderStatus != nil:
				t.Errorf("providerStatus %s, want none", v.ProviderStatus.Raw)
			case tc.wantStatus != "" && (v.ProviderStatus == nil || string(v.ProviderStatus.Raw) != tc.wantStatus):
				t.Errorf("providerStatus %v, want %s", v.ProviderStatus, tc.wantStatus)
			}
		})
	}
	if v := powervs.New().DescribeInstance(&capibmv1.IBMPowerVSMachineTemplate{}, &clusterv1.Machine{}); len(v.Labels) != 0 || v.State != "" || v.ProviderStatus != nil {
		t.Errorf("view of an IBMPowerVSMachineTemplate: %+v, want none", v)
	}
}
