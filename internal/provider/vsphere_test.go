package provider_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	capvv1 "sigs.k8s.io/cluster-api-provider-vsphere/api/govmomi/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/machina-dev/machina/internal/convert/providers/vsphere"
	"github.com/machina-dev/machina/internal/provider"
)

func vsphereInfrastructure() *configv1.Infrastructure {
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	infra.Status.InfrastructureName = "ci-op-7xq2m-vk4h9"
	infra.Status.PlatformStatus = &configv1.PlatformStatus{Type: configv1.VSpherePlatformType, VSphere: &configv1.VSpherePlatformStatus{}}
	infra.Spec.PlatformSpec.VSphere = &configv1.VSpherePlatformSpec{VCenters: []configv1.VSpherePlatformVCenterSpec{{Server: "vcenter.ci.example.com", Datacenters: []string{"cidatacenter"}}}}
	return infra
}

func TestVSphereProvider(t *testing.T) {
	p := provider.VSphere()
	if !slices.Equal(p.InfraMachineFinalizers, []string{"vspheremachine.infrastructure.cluster.x-k8s.io"}) || p.PauseAckAnnotation != "" || !p.Regionless {
		t.Errorf("provider %+v", p)
	}
	reg := provider.Builtin()
	if got, err := reg.ForInfrastructure(vsphereInfrastructure()); err != nil || got.Name != "vsphere" {
		t.Errorf("Infrastructure on vSphere: %v, %v", got.Name, err)
	}
	if got, err := reg.ForProviderSpecKind("VSphereMachineProviderSpec"); err != nil || got.Name != "vsphere" {
		t.Errorf("providerSpec kind: %v, %v", got.Name, err)
	}
	for raw, want := range map[string]bool{`{"workspace":{"server":"vc"}}`: true, `{"memoryMiB":8192}`: true, `{"numCoresPerSocket":2}`: true, `{"flavor":"m1"}`: false, `{`: false} {
		if got := p.MatchesKindlessSpec([]byte(raw)); got != want {
			t.Errorf("MatchesKindlessSpec(%s) = %v", raw, got)
		}
	}
}

// TestVSphereContext builds the context from the Infrastructure alone, with the Cluster's
// VSphereCluster, and from the VSphereCluster alone.
func TestVSphereContext(t *testing.T) {
	s, err := provider.Builtin().Scheme()
	if err != nil {
		t.Fatal(err)
	}
	const ns = "openshift-cluster-api"
	ctx := context.Background()
	infra := vsphereInfrastructure()
	name := infra.Status.InfrastructureName
	cc, err := provider.VSphere().NewContext(ctx, fake.NewClientBuilder().WithScheme(s).Build(), infra, ns)
	if err != nil {
		t.Fatal(err)
	}
	if vp := cc.Platform.(vsphere.Platform); !slices.Equal(vp.VCenters, []string{"vcenter.ci.example.com"}) || vp.ClusterServer != "" || cc.ClusterName != name {
		t.Errorf("without a VSphereCluster: %+v", vp)
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: capvv1.GroupVersion.Group, Kind: "VSphereCluster", Name: name}}},
		&capvv1.VSphereCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: capvv1.VSphereClusterSpec{Server: "vcenter.ci.example.com"}},
	).Build()
	cc, err = provider.VSphere().NewContext(ctx, c, infra, ns)
	if err != nil {
		t.Fatal(err)
	}
	if vp := cc.Platform.(vsphere.Platform); vp.ClusterServer != "vcenter.ci.example.com" || len(vp.VCenters) != 1 {
		t.Errorf("with the VSphereCluster: %+v", vp)
	}
	infra.Status.PlatformStatus = nil
	cc, err = provider.VSphere().NewContext(ctx, c, infra, ns)
	if err != nil {
		t.Fatal(err)
	}
	if vp := cc.Platform.(vsphere.Platform); vp.ClusterServer != "vcenter.ci.example.com" || vp.VCenters != nil {
		t.Errorf("from the VSphereCluster alone: %+v", vp)
	}
	if _, err := provider.VSphere().NewContext(ctx, fake.NewClientBuilder().WithScheme(s).Build(), infra, ns); err == nil || !strings.Contains(err.Error(), "Cluster") {
		t.Errorf("neither vSphere platform status nor a VSphereCluster: %v", err)
	}
	// Offline: the Infrastructure's vCenters and the VSphereCluster's server.
	pl, err := provider.VSphere().NewPlatform("")
	if err != nil {
		t.Fatal(err)
	}
	pl = provider.VSphere().ApplyClusterObject(provider.VSphere().ApplyClusterObject(pl, vsphereInfrastructure()), &capvv1.VSphereCluster{Spec: capvv1.VSphereClusterSpec{Server: "vc2"}})
	if vp := pl.(vsphere.Platform); vp.ClusterServer != "vc2" || len(vp.VCenters) != 1 {
		t.Errorf("offline platform %+v", vp)
	}
}
