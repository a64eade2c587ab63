package openstack

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/machina-dev/machina/internal/convert"
	ct "github.com/machina-dev/machina/internal/convert/converttest"
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

// The actuator's own annotations (and the shared instance-state one) stay on the Machine API
// Machine; the user's annotations are carried.
func TestActuatorAnnotationsNotCarried(t *testing.T) {
	raw, err := json.Marshal(genProviderSpec(ct.New(1)))
	if err != nil {
		t.Fatal(err)
	}
	m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "w-1", Namespace: "openshift-machine-api",
		Labels: map[string]string{convert.MachineAPIClusterLabel: cluster},
		Annotations: map[string]string{ResourceIDAnnotation: "6f1c1c2e-0000-4000-8000-000000000001", InstanceStatusAnnotation: "ACTIVE",
			convert.MachineAPIInstanceStateAnnotation: "ACTIVE", "example.com/owner": "team-a"}},
		Spec: machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: raw}}}}
	out, _, errs := convert.ToClusterAPIMachine(m, testCtx)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, k := range []string{ResourceIDAnnotation, InstanceStatusAnnotation, convert.MachineAPIInstanceStateAnnotation} {
		if v, ok := out.Machine.Annotations[k]; ok {
			t.Errorf("annotation %s=%q carried to the Cluster API Machine", k, v)
		}
	}
	if out.Machine.Annotations["example.com/owner"] != "team-a" {
		t.Errorf("the user's annotation was not carried: %v", out.Machine.Annotations)
	}
}
