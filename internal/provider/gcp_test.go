package provider_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	capgv1 "sigs.k8s.io/cluster-api-provider-gcp/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/machina-dev/machina/internal/convert/providers/gcp"
	"github.com/machina-dev/machina/internal/provider"
)

func TestGCPProvider(t *testing.T) {
	p := provider.GCP()
	if !slices.Equal(p.InfraMachineFinalizers, []string{"gcpmachine.infrastructure.cluster.x-k8s.io"}) {
		t.Errorf("finalizers %v", p.InfraMachineFinalizers)
	}
	if got, err := provider.Builtin().ForInfrastructure(gcpInfrastructure()); err != nil || got.Name != "gcp" {
		t.Errorf("Infrastructure on GCP: %v, %v", got.Name, err)
	}
	for raw, want := range map[string]bool{`{"machineType":"n2-standard-4"}`: true, `{"serviceAccounts":[]}`: true, `{"instanceType":"m5"}`: false, `{`: false} {
		if got := p.MatchesKindlessSpec([]byte(raw)); got != want {
			t.Errorf("MatchesKindlessSpec(%s) = %v", raw, got)
		}
	}
	if got := p.SpecRegion([]byte(`{"region":"us-east1","zone":"us-east1-b"}`)); got != "us-east1" {
		t.Errorf("SpecRegion %q", got)
	}
	if got := p.ZoneRegion("asia-northeast1-c"); got != "asia-northeast1" {
		t.Errorf("ZoneRegion %q", got)
	}
}

func gcpInfrastructure() *configv1.Infrastructure {
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	infra.Status.InfrastructureName = "ci-op-4f7v2-kx8qz"
	infra.Status.PlatformStatus = &configv1.PlatformStatus{Type: configv1.GCPPlatformType, GCP: &configv1.GCPPlatformStatus{ProjectID: "openshift-gce-devel", Region: "us-central1"}}
	return infra
}

// TestGCPContext builds the context from the Infrastructure alone (network unknown), with the
// Cluster's GCPCluster (network known), and from the GCPCluster alone.
func TestGCPContext(t *testing.T) {
	s, err := provider.Builtin().Scheme()
	if err != nil {
		t.Fatal(err)
	}
	const ns = "openshift-cluster-api"
	ctx := context.Background()
	infra := gcpInfrastructure()
	cc, err := provider.GCP().NewContext(ctx, fake.NewClientBuilder().WithScheme(s).Build(), infra, ns)
	if err != nil {
		t.Fatal(err)
	}
	if gp := cc.Platform.(gcp.Platform); gp.Region != "us-central1" || gp.Project != "openshift-gce-devel" || gp.Network != nil {
		t.Errorf("without a GCPCluster: %+v", gp)
	}

	name := infra.Status.InfrastructureName
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: capgv1.GroupVersion.Group, Kind: "GCPCluster", Name: name}}},
		&capgv1.GCPCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: capgv1.GCPClusterSpec{Project: "openshift-gce-devel", Region: "us-central1",
			Network: capgv1.NetworkSpec{Name: ptr.To(name + "-network")}}},
	).Build()
	cc, err = provider.GCP().NewContext(ctx, c, infra, ns)
	if err != nil {
		t.Fatal(err)
	}
	if n := cc.Platform.(gcp.Platform).Network; n == nil || n.Name != name+"-network" || n.Project != "openshift-gce-devel" {
		t.Errorf("with the GCPCluster: network %+v", n)
	}

	infra.Status.PlatformStatus = nil
	cc, err = provider.GCP().NewContext(ctx, c, infra, ns)
	if err != nil {
		t.Fatal(err)
	}
	if gp := cc.Platform.(gcp.Platform); gp.Region != "us-central1" || gp.Project != "openshift-gce-devel" || gp.Network == nil {
		t.Errorf("from the GCPCluster alone: %+v", gp)
	}
	if _, err := provider.GCP().NewContext(ctx, fake.NewClientBuilder().WithScheme(s).Build(), infra, ns); err == nil || !strings.Contains(err.Error(), "Cluster") {
		t.Errorf("neither GCP platform status nor a GCPCluster: %v", err)
	}
}
