package azure

import (
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	capzv1 "sigs.k8s.io/cluster-api-provider-azure/api/v1beta1"

	"github.com/machina-dev/machina/internal/convert"
	ct "github.com/machina-dev/machina/internal/convert/converttest"
)

const dualStack = configv1.DualStackIPv4Primary

// The context learns the IP family from the Infrastructure and whether CAPZ adds IPv6 IP
// configurations from the AzureCluster's virtual network.
func TestDualStackContext(t *testing.T) {
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	infra.Status.InfrastructureName = cluster
	infra.Status.PlatformStatus = &configv1.PlatformStatus{Type: configv1.AzurePlatformType, Azure: &configv1.AzurePlatformStatus{ResourceGroupName: rg}}
	ac := installerCluster()
	c, err := NewContext(infra, ac)
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Platform.(Platform); p.IPFamily != configv1.IPv4 || !ptr.Equal(p.VnetIPv6, ptr.To(false)) {
		t.Errorf("IPv4 cluster: ipFamily %q, vnet IPv6 %v", p.IPFamily, p.VnetIPv6)
	}
	infra.Status.PlatformStatus.Azure.IPFamily = dualStack
	ac.Spec.NetworkSpec.Vnet.CIDRBlocks = []string{"10.0.0.0/16", "fd00:0:0:1::/64"}
	if c, err = NewContext(infra, ac); err != nil {
		t.Fatal(err)
	}
	if p := c.Platform.(Platform); p.IPFamily != dualStack || !ptr.Equal(p.VnetIPv6, ptr.To(true)) {
		t.Errorf("dual-stack cluster: ipFamily %q, vnet IPv6 %v", p.IPFamily, p.VnetIPv6)
	}
	if p := newPlatform(t); p.IPFamily != "" || p.VnetIPv6 != nil {
		t.Errorf("offline without cluster objects: %+v", p)
	}
}

func withIPs(family configv1.IPFamilyType, vnetIPv6 *bool, outbound string) Platform {
	p := testPlatform
	p.IPFamily, p.VnetIPv6, p.OutboundLoadBalancer = family, vnetIPv6, ptr.To(outbound)
	return p
}

func warned(r *convert.Report) []string {
	var out []string
	for _, w := range r.Warnings {
		out = append(out, w.Field)
	}
	return out
}

// A worker converts on a dual-stack cluster only when CAPZ gives its interface the IPv6 IP
// configuration too and it joins no load balancer.
func TestDualStackToCAPZ(t *testing.T) {
	for _, tc := range []struct {
		name           string
		p              Platform
		lb             string
		errors, warned []string
	}{
		{name: "IPv4 as before", p: withIPs(configv1.IPv4, ptr.To(false), cluster), lb: cluster},
		{name: "dual-stack without load balancer", p: withIPs(dualStack, ptr.To(true), "")},
		{name: "dual-stack AzureCluster without IPv6 CIDR", p: withIPs(dualStack, ptr.To(false), ""), errors: []string{"v.subnet"}},
		{name: "dual-stack with the node outbound load balancer", p: withIPs(dualStack, ptr.To(true), cluster), lb: cluster, errors: []string{"v.publicLoadBalancer"}},
		{name: "IPv4 cluster, IPv6 CIDR", p: withIPs(configv1.IPv4, ptr.To(true), ""), errors: []string{"v.subnet"}},
		{name: "no Infrastructure, IPv6 CIDR", p: withIPs("", ptr.To(true), ""), warned: []string{"v.subnet"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := genProviderSpec(ct.New(9))
			ps.PublicLoadBalancer = tc.lb
			r := toInfra(t, tc.p, ps)
			if got := fields(r.Errors); !slices.Equal(got, tc.errors) {
				t.Errorf("errors at %v, want %v: %v", got, tc.errors, r.Errors)
			}
			if got := warned(r); !slices.Equal(got, tc.warned) {
				t.Errorf("warnings at %v, want %v: %v", got, tc.warned, r.Warnings)
			}
		})
	}
	// Offline without the AzureCluster the IPv6 configuration is not checked; a named load
	// balancer is refused all the same.
	p := newPlatform(t)
	p.IPFamily = dualStack
	ps := genProviderSpec(ct.New(9))
	r := toInfra(t, p, ps)
	if got := fields(r.Errors); !slices.Contains(got, "v.publicLoadBalancer") || !slices.Contains(warned(r), "v.subnet") {
		t.Errorf("offline: errors %v, warnings %v", r.Errors, r.Warnings)
	}
	if msg := r.Errors.ToAggregate().Error(); !strings.Contains(msg, "status.platformStatus.azure.ipFamily DualStackIPv4Primary") || !strings.Contains(msg, "IPv6 configuration in none") {
		t.Errorf("the error does not say why: %s", msg)
	}
}

// Going back, the same: the Machine API would name the AzureCluster's node outbound load
// balancer, and the IPv6 IP configuration must be CAPZ's as well as the actuator's.
func TestDualStackToMAPI(t *testing.T) {
	paths := convert.InfraPaths{Infra: field.NewPath("AzureMachine", "spec"), Machine: field.NewPath("Machine", "spec"), Metadata: field.NewPath("Machine", "metadata")}
	for _, tc := range []struct {
		name   string
		p      Platform
		errors []string
	}{
		{name: "IPv4 as before", p: withIPs(configv1.IPv4, ptr.To(false), cluster)},
		{name: "dual-stack without load balancer", p: withIPs(dualStack, ptr.To(true), "")},
		{name: "dual-stack with the node outbound load balancer", p: withIPs(dualStack, ptr.To(true), cluster), errors: []string{"AzureMachine.spec.networkInterfaces[0]"}},
		{name: "dual-stack AzureCluster without IPv6 CIDR", p: withIPs(dualStack, ptr.To(false), ""), errors: []string{"AzureMachine.spec.networkInterfaces[0].subnetName"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &convert.Report{}
			tc.p.FromInfra(genSpec(ct.New(4)), convert.MachineValues{}, paths, r)
			if got := fields(r.Errors); !slices.Equal(got, tc.errors) {
				t.Errorf("errors at %v, want %v: %v", got, tc.errors, r.Errors)
			}
			if len(r.Warnings) > 0 {
				t.Errorf("warnings %v", r.Warnings)
			}
		})
	}
}

// Control-plane Machines always join the API server's internal load balancer, whose IPv6 pool
// CAPZ leaves empty: on a dual-stack cluster they do not convert, in either direction.
func TestDualStackControlPlane(t *testing.T) {
	p, err := FromAzureCluster(installerCluster())
	if err != nil {
		t.Fatal(err)
	}
	if !p.ControlPlaneRole().Converts {
		t.Fatal("an IPv4 cluster's control plane is refused")
	}
	p.IPFamily, p.VnetIPv6 = dualStack, ptr.To(true)
	if rc := p.ControlPlaneRole(); rc.Converts || !strings.Contains(rc.Why, ipFamilyField) || !strings.Contains(rc.Why, "-internal-ipv6") {
		t.Errorf("dual-stack control plane: %+v", rc)
	}
	ctx := cpContext(t, func(ac *capzv1.AzureCluster) {
		ac.Spec.NetworkSpec.Vnet.CIDRBlocks = []string{"10.0.0.0/16", "fd00::/48"}
	})
	dp := ctx.Platform.(Platform)
	dp.IPFamily = dualStack
	ctx.Platform = dp
	if _, _, errs := convert.ToClusterAPIMachine(azureMachine(t, masterSpec(), map[string]string{roleLabel: "master"}), ctx); !slices.Contains(fields(errs), "metadata.labels["+roleLabel+"]") {
		t.Errorf("a dual-stack master converted: %v", errs)
	}
	m, im := capiControlPlane(t, map[string]string{cpLabel: ""})
	if _, _, errs := convert.ToMachineAPIMachine(m, im, ctx); !slices.Contains(fields(errs), "Machine.metadata.labels["+cpLabel+"]") {
		t.Errorf("a dual-stack Cluster API control-plane Machine converted back: %v", errs)
	}
}
