package openstack

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	capov1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/machina-dev/machina/internal/convert"
	ct "github.com/machina-dev/machina/internal/convert/converttest"
)

const roleLabel = convert.MachineAPIRoleLabel

var (
	installerStyle = &APIServerIngress{}
	withLB         = &APIServerIngress{LoadBalancer: true}
	withFIP        = &APIServerIngress{FloatingIP: true}
)

func ingressContext(in *APIServerIngress) convert.Context {
	c := testCtx
	p := c.Platform.(Platform)
	p.APIServer = in
	c.Platform = p
	return c
}

func roleMachine(t *testing.T, labels map[string]string) *machinev1beta1.Machine {
	t.Helper()
	raw, err := json.Marshal(genProviderSpec(ct.New(7)))
	if err != nil {
		t.Fatal(err)
	}
	labels[convert.MachineAPIClusterLabel] = cluster
	return &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "openshift-machine-api", Labels: labels},
		Spec: machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: raw}}}}
}

// TestAPIServerIngressOf reads what CAPO does for control-plane Machines from the
// OpenStackCluster: the installer's (floating IP disabled, no load balancer) does nothing.
func TestAPIServerIngressOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec capov1.OpenStackClusterSpec
		want APIServerIngress
	}{
		{"installer", capov1.OpenStackClusterSpec{DisableAPIServerFloatingIP: ptr.To(true)}, APIServerIngress{}},
		{"CAPO's defaults", capov1.OpenStackClusterSpec{}, APIServerIngress{FloatingIP: true}},
		{"no external network", capov1.OpenStackClusterSpec{DisableExternalNetwork: ptr.To(true)}, APIServerIngress{}},
		{"load balancer", capov1.OpenStackClusterSpec{APIServerLoadBalancer: &capov1.APIServerLoadBalancer{Enabled: ptr.To(true)}, DisableAPIServerFloatingIP: ptr.To(true)}, APIServerIngress{LoadBalancer: true}},
		{"load balancer disabled", capov1.OpenStackClusterSpec{APIServerLoadBalancer: &capov1.APIServerLoadBalancer{Enabled: ptr.To(false)}, DisableAPIServerFloatingIP: ptr.To(true)}, APIServerIngress{}},
	} {
		if got := *APIServerIngressOf(&capov1.OpenStackCluster{Spec: tc.spec}); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestControlPlaneRole: role master and the control-plane label convert into each other when
// CAPO would do nothing the actuator does not (the installer's OpenStackCluster), are refused
// naming the label and the OpenStackCluster's field when CAPO would add a load balancer member
// or a floating IP, and convert with a warning when the OpenStackCluster is not known.
func TestControlPlaneRole(t *testing.T) {
	master := func() map[string]string { return map[string]string{roleLabel: "master"} }
	roleField := "metadata.labels[" + roleLabel + "]"
	for _, tc := range []struct {
		name       string
		ingress    *APIServerIngress
		labels     map[string]string
		wantErrors []string
		why        string
		wantCP     bool
		warns      bool
	}{
		{"master converts", installerStyle, master(), nil, "", true, false},
		{"worker stays a worker", installerStyle, map[string]string{roleLabel: "worker"}, nil, "", false, false},
		{"load balancer refuses a master", withLB, master(), []string{roleField}, "spec.apiServerLoadBalancer.enabled", false, false},
		{"floating IP refuses a master", withFIP, master(), []string{roleField}, "spec.disableAPIServerFloatingIP", false, false},
		{"load balancer leaves a worker alone", withLB, map[string]string{roleLabel: "worker"}, nil, "", false, false},
		{"a label the actuator ignores", installerStyle, map[string]string{roleLabel: "worker", clusterv1.MachineControlPlaneLabel: ""}, []string{"metadata.labels[" + clusterv1.MachineControlPlaneLabel + "]"}, "", false, false},
		{"without the OpenStackCluster", nil, master(), nil, "", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, w, errs := convert.ToClusterAPIMachine(roleMachine(t, tc.labels), ingressContext(tc.ingress))
			if got := ct.Fields(errs); !slices.Equal(got, tc.wantErrors) {
				t.Fatalf("errors on %v, want %v: %v", got, tc.wantErrors, errs)
			}
			if tc.wantErrors != nil {
				if !strings.Contains(errs[0].Detail, tc.why) {
					t.Errorf("refusal does not name %s: %v", tc.why, errs[0].Detail)
				}
				return
			}
			if _, cp := out.Machine.Labels[clusterv1.MachineControlPlaneLabel]; cp != tc.wantCP {
				t.Errorf("control-plane label %v, want %v", cp, tc.wantCP)
			}
			warned := slices.ContainsFunc(w, func(w convert.Warning) bool { return strings.Contains(w.Detail, "OpenStackCluster is not known") })
			if warned != tc.warns {
				t.Errorf("warning about the unknown OpenStackCluster: %v, want %v (%v)", warned, tc.warns, w)
			}
		})
	}
}

// TestControlPlaneRoleToMachineAPI is the reverse direction.
func TestControlPlaneRoleToMachineAPI(t *testing.T) {
	cp := clusterv1.MachineControlPlaneLabel
	for _, tc := range []struct {
		name       string
		ingress    *APIServerIngress
		labels     map[string]string
		wantErrors []string
		wantRole   string
	}{
		{"control plane becomes master", installerStyle, map[string]string{cp: "", roleLabel: "master"}, nil, "master"},
		{"a Cluster API-born control-plane Machine gets the role", installerStyle, map[string]string{cp: ""}, nil, "master"},
		{"refused behind CAPO's load balancer", withLB, map[string]string{cp: ""}, []string{"Machine.metadata.labels[" + cp + "]"}, ""},
		{"master without the label", installerStyle, map[string]string{roleLabel: "master"}, []string{"Machine.metadata.labels[" + roleLabel + "]"}, ""},
		{"a worker stays a worker", withFIP, map[string]string{roleLabel: "worker"}, nil, "worker"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conv, _, errs := convert.ToClusterAPIMachine(roleMachine(t, map[string]string{}), ingressContext(installerStyle))
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			m := conv.Machine
			m.Labels = tc.labels
			m.Labels[clusterv1.ClusterNameLabel] = cluster
			m.Labels[convert.MachineAPIClusterLabel] = cluster
			out, _, errs := convert.ToMachineAPIMachine(m, conv.InfraMachine, ingressContext(tc.ingress))
			if got := ct.Fields(errs); !slices.Equal(got, tc.wantErrors) {
				t.Fatalf("errors on %v, want %v: %v", got, tc.wantErrors, errs)
			}
			if tc.wantErrors != nil {
				return
			}
			if _, ok := out.Labels[cp]; ok || out.Labels[roleLabel] != tc.wantRole {
				t.Errorf("labels %v, want role %q and no %s", out.Labels, tc.wantRole, cp)
			}
		})
	}
}
