package openstack

import (
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNewContext(t *testing.T) {
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	infra.Status.InfrastructureName = cluster
	if _, err := NewContext(infra); err == nil || !strings.Contains(err.Error(), "no OpenStack platform status") {
		t.Errorf("non-OpenStack Infrastructure: %v", err)
	}
	if _, err := NewContext(nil); err == nil {
		t.Error("nil Infrastructure accepted")
	}
	// Older clusters set only the single-address fields; newer ones both. Each address once,
	// API addresses first, in the Infrastructure's order.
	infra.Status.PlatformStatus = &configv1.PlatformStatus{Type: configv1.OpenStackPlatformType, OpenStack: &configv1.OpenStackPlatformStatus{
		APIServerInternalIP:  "10.0.0.5", //nolint:staticcheck // older clusters still set only the single address
		APIServerInternalIPs: []string{"10.0.0.5", "fd2e:6f44:5dd8:c956::5"},
		IngressIP:            "10.0.0.7", //nolint:staticcheck // as above
		IngressIPs:           []string{"10.0.0.7", "fd2e:6f44:5dd8:c956::7"},
	}}
	c, err := NewContext(infra)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.5", "fd2e:6f44:5dd8:c956::5", "10.0.0.7", "fd2e:6f44:5dd8:c956::7"}
	if got := c.Platform.(Platform).VIPs; c.ClusterName != cluster || !slices.Equal(got, want) || c.Namespaces.ClusterAPI != "openshift-cluster-api" {
		t.Errorf("context %+v, VIPs %v, want %v", c, got, want)
	}
	// OpenStack platform status without addresses: known to be none, not unknown.
	infra.Status.PlatformStatus.OpenStack = &configv1.OpenStackPlatformStatus{}
	if p, err := FromInfrastructure(infra); err != nil || p.VIPs == nil || len(p.VIPs) != 0 {
		t.Errorf("no addresses: %#v, %v", p.VIPs, err)
	}
	if New().VIPs != nil {
		t.Error("New() claims to know the virtual IPs")
	}
}
