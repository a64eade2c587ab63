package provider_test

import (
	"context"
	"slices"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	capibmv1 "sigs.k8s.io/cluster-api-provider-ibmcloud/api/powervs/v1beta3"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/machina-dev/machina/internal/convert/providers/powervs"
	"github.com/machina-dev/machina/internal/provider"
)

func TestPowerVSProvider(t *testing.T) {
	p := provider.PowerVS()
	if !slices.Equal(p.InfraMachineFinalizers, []string{"ibmpowervsmachine.infrastructure.cluster.x-k8s.io"}) {
		t.Errorf("finalizers %v", p.InfraMachineFinalizers)
	}
	if got, err := provider.Builtin().ForInfrastructure(powervsInfrastructure()); err != nil || got.Name != "powervs" {
		t.Errorf("Infrastructure on PowerVS: %v, %v", got.Name, err)
	}
	if got, err := provider.Builtin().ForProviderSpecKind("PowerVSMachineProviderConfig"); err != nil || got.Name != "powervs" {
		t.Errorf("providerSpec kind: %v, %v", got.Name, err)
	}
	for raw, want := range map[string]bool{`{"serviceInstance":{"type":"ID"}}`: true, `{"keyPairName":"k"}`: true, `{"keyName":"k"}`: false, `{"machineType":"m"}`: false, `{`: false} {
		if got := p.MatchesKindlessSpec([]byte(raw)); got != want {
			t.Errorf("MatchesKindlessSpec(%s) = %v", raw, got)
		}
	}
	// The IBMPowerVSCluster names the workspace; other objects change nothing.
	pl, _ := p.NewPlatform("")
	pc := &capibmv1.IBMPowerVSCluster{ObjectMeta: metav1.ObjectMeta{Name: "c1"}}
	if got := p.ApplyClusterObject(pl, pc).(powervs.Platform).ServiceInstanceName; got != "c1-serviceInstance" {
		t.Errorf("workspace from the IBMPowerVSCluster %q", got)
	}
	if got := p.ApplyClusterObject(pl, powervsInfrastructure()); got != pl {
		t.Errorf("the Infrastructure changed the platform: %+v", got)
	}
}

func powervsInfrastructure() *configv1.Infrastructure {
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	infra.Status.InfrastructureName = "ci-op-p9w2t-b7c4d"
	infra.Status.PlatformStatus = &configv1.PlatformStatus{Type: configv1.PowerVSPlatformType, PowerVS: &configv1.PowerVSPlatformStatus{Region: "dal", Zone: "dal10"}}
	return infra
}

// TestPowerVSContext builds the context from the Infrastructure alone (workspace unknown) and
// with the Cluster's IBMPowerVSCluster (its workspace known).
func TestPowerVSContext(t *testing.T) {
	s, err := provider.Builtin().Scheme()
	if err != nil {
		t.Fatal(err)
	}
	const ns = "openshift-cluster-api"
	ctx := context.Background()
	infra := powervsInfrastructure()
	cc, err := provider.PowerVS().NewContext(ctx, fake.NewClientBuilder().WithScheme(s).Build(), infra, ns)
	if err != nil {
		t.Fatal(err)
	}
	if pp := cc.Platform.(powervs.Platform); cc.ClusterName != "ci-op-p9w2t-b7c4d" || pp.ServiceInstanceName != "" || pp.CredentialsSecret != powervs.DefaultCredentialsSecret {
		t.Errorf("without an IBMPowerVSCluster: %s %+v", cc.ClusterName, pp)
	}

	name := infra.Status.InfrastructureName
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: capibmv1.GroupVersion.Group, Kind: "IBMPowerVSCluster", Name: name}}},
		&capibmv1.IBMPowerVSCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: capibmv1.IBMPowerVSClusterSpec{
			ServiceInstance: &capibmv1.IBMPowerVSResourceReference{Name: ptr.To(name + "-power-iaas")}, Zone: ptr.To("dal10")}},
	).Build()
	cc, err = provider.PowerVS().NewContext(ctx, c, infra, ns)
	if err != nil {
		t.Fatal(err)
	}
	if got := cc.Platform.(powervs.Platform).ServiceInstanceName; got != name+"-power-iaas" {
		t.Errorf("with the IBMPowerVSCluster: workspace %q", got)
	}

	// A Cluster that references another kind of InfraCluster is absent for PowerVS; an
	// Infrastructure without a name is an error.
	other := fake.NewClientBuilder().WithScheme(s).WithObjects(&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{Kind: "GCPCluster", Name: name}}}).Build()
	if cc, err = provider.PowerVS().NewContext(ctx, other, infra, ns); err != nil || cc.Platform.(powervs.Platform).ServiceInstanceName != "" {
		t.Errorf("a Cluster on another InfraCluster kind: %+v, %v", cc.Platform, err)
	}
	infra.Status.InfrastructureName = ""
	if _, err := provider.PowerVS().NewContext(ctx, other, infra, ns); err == nil {
		t.Error("an Infrastructure without infrastructureName accepted")
	}
}
