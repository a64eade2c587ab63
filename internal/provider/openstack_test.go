package provider_test

import (
	"context"
	"slices"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/machina-dev/machina/internal/convert/providers/openstack"
	"github.com/machina-dev/machina/internal/provider"
)

func TestOpenStackProvider(t *testing.T) {
	p := provider.OpenStack()
	if !slices.Equal(p.InfraMachineFinalizers, []string{"openstackmachine.infrastructure.cluster.x-k8s.io"}) {
		t.Errorf("finalizers %v", p.InfraMachineFinalizers)
	}
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	if _, err := p.NewContext(context.Background(), nil, infra, "openshift-cluster-api"); err == nil {
		t.Error("an Infrastructure without infrastructureName gave a context")
	}
	infra.Status.InfrastructureName = "ostest-8kq2x"
	cc, err := p.NewContext(context.Background(), nil, infra, "openshift-cluster-api")
	if err != nil {
		t.Fatal(err)
	}
	if op := cc.Platform.(openstack.Platform); cc.ClusterName != "ostest-8kq2x" || op.VIPs != nil {
		t.Errorf("without OpenStack platform status: %+v, VIPs %v (want unknown)", cc, op.VIPs)
	}
	infra.Status.PlatformStatus = &configv1.PlatformStatus{Type: configv1.OpenStackPlatformType, OpenStack: &configv1.OpenStackPlatformStatus{
		APIServerInternalIPs: []string{"10.0.0.5", "fd2e::5"}, IngressIPs: []string{"10.0.0.7"}, APIServerInternalIP: "10.0.0.5"}} //nolint:staticcheck // older clusters still set only the single address
	cc, err = p.NewContext(context.Background(), nil, infra, "openshift-cluster-api")
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
