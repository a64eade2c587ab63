package provider_test

import (
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/machina-dev/machina/internal/provider"
)

func TestBuiltinLookups(t *testing.T) {
	reg := provider.Builtin()
	for _, tc := range []struct {
		what string
		find func() (provider.Provider, error)
		want string
	}{
		{"sim providerSpec", func() (provider.Provider, error) { return reg.ForProviderSpecKind("SimMachineProviderSpec") }, "sim"},
		{"aws providerSpec", func() (provider.Provider, error) { return reg.ForProviderSpecKind("AWSMachineProviderConfig") }, "aws"},
		{"AWSMachine by group", func() (provider.Provider, error) {
			return reg.ForInfraKind(schema.GroupKind{Group: "infrastructure.cluster.x-k8s.io", Kind: "AWSMachine"})
		}, "aws"},
		{"template by kind alone", func() (provider.Provider, error) {
			return reg.ForInfraKind(schema.GroupKind{Kind: "SimMachineTemplate"})
		}, "sim"},
		{"ref", func() (provider.Provider, error) {
			return reg.ForRef(clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "AWSMachineTemplate"})
		}, "aws"},
		{"openstack providerSpec", func() (provider.Provider, error) { return reg.ForProviderSpecKind("OpenstackProviderSpec") }, "openstack"},
		{"OpenStackMachineTemplate ref", func() (provider.Provider, error) {
			return reg.ForRef(clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "OpenStackMachineTemplate"})
		}, "openstack"},
		{"OpenStackCluster", func() (provider.Provider, error) {
			return reg.ForInfraKind(schema.GroupKind{Group: "infrastructure.cluster.x-k8s.io", Kind: "OpenStackCluster"})
		}, "openstack"},
		{"Infrastructure on OpenStack", func() (provider.Provider, error) {
			return reg.ForInfrastructure(&configv1.Infrastructure{Status: configv1.InfrastructureStatus{
				PlatformStatus: &configv1.PlatformStatus{Type: configv1.OpenStackPlatformType}}})
		}, "openstack"},
		{"Infrastructure on AWS", func() (provider.Provider, error) {
			return reg.ForInfrastructure(&configv1.Infrastructure{Status: configv1.InfrastructureStatus{
				PlatformStatus: &configv1.PlatformStatus{Type: configv1.AWSPlatformType}}})
		}, "aws"},
	} {
		p, err := tc.find()
		if err != nil || p.Name != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.what, p.Name, err, tc.want)
		}
	}
}

func TestUnknownKindsNameWhatIsKnown(t *testing.T) {
	reg := provider.Builtin()
	_, err := reg.ForProviderSpecKind("NutanixMachineProviderConfig")
	if err == nil || !strings.Contains(err.Error(), `"NutanixMachineProviderConfig"`) || !strings.Contains(err.Error(), "AWSMachineProviderConfig") {
		t.Errorf("unknown providerSpec kind: %v", err)
	}
	// A kind of the right name in another group is not the provider's.
	if _, err := reg.ForInfraKind(schema.GroupKind{Group: "example.com", Kind: "AWSMachine"}); err == nil {
		t.Error("AWSMachine of group example.com matched the AWS provider")
	}
	if _, err := reg.ForInfrastructure(&configv1.Infrastructure{}); err == nil {
		t.Error("an Infrastructure without platform status matched a provider")
	}
}

func TestEveryProviderIsComplete(t *testing.T) {
	for _, p := range provider.Builtin().All() {
		if p.Name == "" || len(p.ProviderSpecKinds) == 0 || len(p.InfraMachineFinalizers) == 0 || p.NewContext == nil || len(p.PlatformTypes) == 0 {
			t.Errorf("provider %+v is missing a field", p)
		}
		for _, gvk := range p.InfraKinds() {
			if gvk.Group == "" || gvk.Version == "" || gvk.Kind == "" {
				t.Errorf("provider %s: incomplete kind %v", p.Name, gvk)
			}
		}
	}
}

func TestRegistryRefusesSharedKinds(t *testing.T) {
	a := provider.Sim()
	b := provider.AWS()
	b.InfraMachineTemplate = a.InfraMachineTemplate
	_, err := provider.NewRegistry(a, b)
	if err == nil || !strings.Contains(err.Error(), "SimMachineTemplate") {
		t.Errorf("two providers sharing a kind: %v", err)
	}
}

// How each provider's controller acknowledges a pause: a Paused condition (AWS, PowerVS,
// vSphere and the simulated provider), the removal of an annotation (Azure), or not at all,
// when an operator has to (OpenStack, GCP).
func TestPauseAcknowledgements(t *testing.T) {
	want := map[string]string{"aws": "condition", "azure": "annotation", "gcp": "operator", "openstack": "operator", "powervs": "condition", "sim": "condition", "vsphere": "condition"}
	for _, p := range provider.Builtin().All() {
		got := "condition"
		switch {
		case p.PauseAckAnnotation != "" && p.PauseAckByOperator:
			got = "both"
		case p.PauseAckAnnotation != "":
			got = "annotation"
		case p.PauseAckByOperator:
			got = "operator"
		}
		if w, ok := want[p.Name]; ok && got != w {
			t.Errorf("%s acknowledges a pause by %s, want %s", p.Name, got, w)
		}
	}
}
