package provider_test

import (
	"context"
	"slices"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	capov1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/machina-dev/machina/internal/convert/providers/openstack"
	"github.com/machina-dev/machina/internal/provider"
)

func TestOpenStackProvider(t *testing.T) {
	p := provider.OpenStack()
	if !slices.Equal(p.InfraMachineFinalizers, []string{"openstackmachine.infrastructure.cluster.x-k8s.io"}) {
		t.Errorf("finalizers %v", p.InfraMachineFinalizers)
	}
	s, err := provider.Builtin().Scheme()
	if err != nil {
		t.Fatal(err)
	}
	empty := fake.NewClientBuilder().WithScheme(s).Build()
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	if _, err := p.NewContext(context.Background(), empty, infra, "openshift-cluster-api"); err == nil {
		t.Error("an Infrastructure without infrastructureName gave a context")
	}
	infra.Status.InfrastructureName = "ostest-8kq2x"
	cc, err := p.NewContext(context.Background(), empty, infra, "openshift-cluster-api")
	if err != nil {
		t.Fatal(err)
	}
	if op := cc.Platform.(openstack.Platform); cc.ClusterName != "ostest-8kq2x" || op.VIPs != nil || op.APIServer != nil {
		t.Errorf("without OpenStack platform status: %+v, VIPs %v (want unknown)", cc, op.VIPs)
	}
	infra.Status.PlatformStatus = &configv1.PlatformStatus{Type: configv1.OpenStackPlatformType, OpenStack: &configv1.OpenStackPlatformStatus{
		APIServerInternalIPs: []string{"10.0.0.5", "fd2e::5"}, IngressIPs: []string{"10.0.0.7"}, APIServerInternalIP: "10.0.0.5"}} //nolint:staticcheck // older clusters still set only the single address
	cc, err = p.NewContext(context.Background(), empty, infra, "openshift-cluster-api")
	if err != nil {
		t.Fatal(err)
	}
	if got := cc.Platform.(openstack.Platform).VIPs; !slices.Equal(got, []string{"10.0.0.5", "fd2e::5", "10.0.0.7"}) {
		t.Errorf("VIPs %v", got)
	}
	// Offline: the Infrastructure given as a context object adds the same addresses.
	pl, err := p.NewPlatform("")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.ApplyClusterObject(pl, infra).(openstack.Platform).VIPs; len(got) != 3 {
		t.Errorf("offline VIPs %v", got)
	}
}

// TestOpenStackContextReadsOpenStackCluster: the context takes the API server ingress of the
// OpenStackCluster the Cluster references (what decides whether control-plane Machines
// convert), in a cluster and offline.
func TestOpenStackContextReadsOpenStackCluster(t *testing.T) {
	s, err := provider.Builtin().Scheme()
	if err != nil {
		t.Fatal(err)
	}
	const ns, name = "openshift-cluster-api", "ostest-8kq2x"
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	infra.Status.InfrastructureName = name
	oc := &capov1.OpenStackCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: capov1.OpenStackClusterSpec{DisableAPIServerFloatingIP: ptr.To(true), APIServerLoadBalancer: &capov1.APIServerLoadBalancer{Enabled: ptr.To(true)}}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: capov1.SchemeGroupVersion.Group, Kind: "OpenStackCluster", Name: name}}},
		oc).Build()
	cc, err := provider.OpenStack().NewContext(context.Background(), c, infra, ns)
	if err != nil {
		t.Fatal(err)
	}
	want := openstack.APIServerIngress{LoadBalancer: true}
	if got := cc.Platform.(openstack.Platform).APIServer; got == nil || *got != want {
		t.Errorf("in a cluster: API server ingress %+v, want %+v", got, want)
	}
	pl, err := provider.OpenStack().NewPlatform("")
	if err != nil {
		t.Fatal(err)
	}
	if got := provider.OpenStack().ApplyClusterObject(pl, oc).(openstack.Platform).APIServer; got == nil || *got != want {
		t.Errorf("offline: API server ingress %+v, want %+v", got, want)
	}
}
