package provider_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	capzv1 "sigs.k8s.io/cluster-api-provider-azure/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/machina-dev/machina/internal/convert/providers/azure"
	"github.com/machina-dev/machina/internal/provider"
)

func TestAzureProvider(t *testing.T) {
	p := provider.Azure()
	if !slices.Equal(p.InfraMachineFinalizers, []string{"azuremachine.infrastructure.cluster.x-k8s.io"}) {
		t.Errorf("finalizers %v", p.InfraMachineFinalizers)
	}
	const name, ns = "ci-op-4x7kq-9bd2c", "openshift-cluster-api"
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}, Status: configv1.InfrastructureStatus{InfrastructureName: name,
		PlatformStatus: &configv1.PlatformStatus{Type: configv1.AzurePlatformType, Azure: &configv1.AzurePlatformStatus{ResourceGroupName: name + "-rg",
			IPFamily: configv1.DualStackIPv6Primary}}}}
	s, err := provider.Builtin().Scheme()
	if err != nil {
		t.Fatal(err)
	}
	empty := fake.NewClientBuilder().WithScheme(s).Build()
	if _, err := p.NewContext(context.Background(), empty, infra, ns); err == nil || !strings.Contains(err.Error(), "AzureCluster") {
		t.Errorf("without an AzureCluster: %v", err)
	}
	ac := &capzv1.AzureCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	ac.Spec.Location, ac.Spec.SubscriptionID = "centralus", "53b8f551-f0fc-4bea-8cba-6d1fefd54c8a"
	ac.Spec.NetworkSpec.Vnet.Name = name + "-vnet"
	ac.Spec.NetworkSpec.Vnet.CIDRBlocks = []string{"10.0.0.0/16", "fd00::/48"}
	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: clusterv1.ClusterSpec{
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: capzv1.GroupVersion.Group, Kind: "AzureCluster", Name: name}}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(ac, cl).Build()
	cc, err := p.NewContext(context.Background(), c, infra, ns)
	if err != nil {
		t.Fatal(err)
	}
	ap := cc.Platform.(azure.Platform)
	if cc.ClusterName != name || ap.Location != "centralus" || ap.ResourceGroup != name+"-rg" || ap.Vnet != name+"-vnet" || ap.SubscriptionID == "" || ap.OutboundLoadBalancer == nil ||
		ap.IPFamily != configv1.DualStackIPv6Primary || ap.VnetIPv6 == nil || !*ap.VnetIPv6 {
		t.Errorf("context %+v, platform %+v", cc, ap)
	}

	// Offline: the region from the AzureCluster or a providerSpec, the rest from context objects.
	if got := p.RegionOf(ac); got != "centralus" {
		t.Errorf("RegionOf(AzureCluster) = %q", got)
	}
	if got := p.RegionOf(infra); got != "" {
		t.Errorf("RegionOf(Infrastructure) = %q; it names no Azure region", got)
	}
	if got := p.SpecRegion([]byte(`{"location":"eastus2","vmSize":"Standard_D4s_v3"}`)); got != "eastus2" {
		t.Errorf("SpecRegion = %q", got)
	}
	for spec, want := range map[string]bool{`{"vmSize":"Standard_D4s_v3"}`: true, `{"osDisk":{}}`: true, `{"flavor":"m1.large"}`: false, `not json`: false} {
		if got := p.MatchesKindlessSpec([]byte(spec)); got != want {
			t.Errorf("MatchesKindlessSpec(%s) = %v", spec, got)
		}
	}
	pl, err := p.NewPlatform("centralus")
	if err != nil {
		t.Fatal(err)
	}
	pl = p.ApplyClusterObject(p.ApplyClusterObject(pl, infra), ac)
	if got := pl.(azure.Platform); got.ResourceGroup != name+"-rg" || got.Vnet != name+"-vnet" || got.IPFamily != configv1.DualStackIPv6Primary || got.VnetIPv6 == nil {
		t.Errorf("offline platform %+v", got)
	}
	if r, err := provider.Builtin().ForInfrastructure(infra); err != nil || r.Name != "azure" {
		t.Errorf("ForInfrastructure: %v, %v", r.Name, err)
	}
}
