package provider_test

import (
	"errors"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/runtime"
	capav1 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	simv1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/provider"
)

func TestEveryProviderConvertsOffline(t *testing.T) {
	for _, p := range provider.Builtin().All() {
		if p.AddToScheme == nil || p.NewPlatform == nil || p.MatchesKindlessSpec == nil || (!p.Regionless && (p.RegionOf == nil || p.SpecRegion == nil)) {
			t.Errorf("provider %s lacks an offline conversion hook", p.Name)
			continue
		}
		if p.Regionless {
			if pl, err := p.NewPlatform(""); err != nil || pl.Name() != p.Name || pl.InfraMachineGVK() != p.InfraMachine || pl.InfraMachineTemplateGVK() != p.InfraMachineTemplate {
				t.Errorf("provider %s: NewPlatform without a region gives %v, %v; want its platform", p.Name, pl, err)
			}
			continue
		}
		pl, err := p.NewPlatform("r-1")
		if err != nil {
			t.Errorf("provider %s: NewPlatform: %v", p.Name, err)
			continue
		}
		if pl.Name() != p.Name || pl.InfraMachineGVK() != p.InfraMachine || pl.InfraMachineTemplateGVK() != p.InfraMachineTemplate {
			t.Errorf("provider %s: NewPlatform gives %#v, whose names differ from the provider's", p.Name, pl)
		}
		if pl, err := p.NewPlatform(""); err == nil || pl != nil {
			t.Errorf("provider %s: NewPlatform without a region gives %v, %v; want an error and no platform", p.Name, pl, err)
		}
	}
}

func TestRegionOf(t *testing.T) {
	awsInfra := &configv1.Infrastructure{Status: configv1.InfrastructureStatus{PlatformStatus: &configv1.PlatformStatus{
		Type: configv1.AWSPlatformType, AWS: &configv1.AWSPlatformStatus{Region: "us-east-1"}}}}
	noneInfra := &configv1.Infrastructure{Status: configv1.InfrastructureStatus{InfrastructureName: "lab-1",
		PlatformStatus: &configv1.PlatformStatus{Type: configv1.NonePlatformType}}}
	awsCluster := &capav1.AWSCluster{Spec: capav1.AWSClusterSpec{Region: "eu-west-3"}}
	simCluster := &simv1.SimCluster{Spec: simv1.SimClusterSpec{Region: "sim-east-1"}}
	for _, tc := range []struct {
		p    provider.Provider
		obj  client.Object
		want string
	}{
		{provider.AWS(), awsInfra, "us-east-1"},
		{provider.AWS(), noneInfra, ""},
		{provider.AWS(), awsCluster, "eu-west-3"},
		{provider.AWS(), simCluster, ""},
		{provider.Sim(), simCluster, "sim-east-1"},
		{provider.Sim(), awsInfra, ""}, // the Infrastructure never names the simulated cloud's region
		{provider.Sim(), awsCluster, ""},
	} {
		if got := tc.p.RegionOf(tc.obj); got != tc.want {
			t.Errorf("%s.RegionOf(%T) = %q, want %q", tc.p.Name, tc.obj, got, tc.want)
		}
	}
}

func TestProviderSpecHooks(t *testing.T) {
	for _, tc := range []struct {
		spec          string
		awsRegion     string
		simRegion     string
		aws, simMatch bool // MatchesKindlessSpec
		openstack     bool
	}{
		{spec: `{"placement":{"region":"us-east-2","availabilityZone":"us-east-2a"}}`, awsRegion: "us-east-2", aws: true},
		{spec: `{"ami":{"id":"ami-1"}}`, aws: true},
		{spec: `{"region":"sim-west-1","zone":"sim-west-1a"}`, simRegion: "sim-west-1", simMatch: true},
		{spec: `{"instanceType":"m5.large"}`},
		{spec: `not json`},
		{spec: `{"region":7}`},
		{spec: `{"flavor":"m1.large","image":"rhcos"}`, openstack: true},
		{spec: `{"cloudsSecret":{"name":"c"}}`, openstack: true},
	} {
		aws, sim := provider.AWS(), provider.Sim()
		raw := []byte(tc.spec)
		if got := aws.SpecRegion(raw); got != tc.awsRegion {
			t.Errorf("aws.SpecRegion(%s) = %q, want %q", tc.spec, got, tc.awsRegion)
		}
		if got := sim.SpecRegion(raw); got != tc.simRegion {
			t.Errorf("sim.SpecRegion(%s) = %q, want %q", tc.spec, got, tc.simRegion)
		}
		if got := aws.MatchesKindlessSpec(raw); got != tc.aws {
			t.Errorf("aws.MatchesKindlessSpec(%s) = %v, want %v", tc.spec, got, tc.aws)
		}
		if got := sim.MatchesKindlessSpec(raw); got != tc.simMatch {
			t.Errorf("sim.MatchesKindlessSpec(%s) = %v, want %v", tc.spec, got, tc.simMatch)
		}
		if got := provider.OpenStack().MatchesKindlessSpec(raw); got != tc.openstack {
			t.Errorf("openstack.MatchesKindlessSpec(%s) = %v, want %v", tc.spec, got, tc.openstack)
		}
	}
}

func TestRegistryScheme(t *testing.T) {
	reg := provider.Builtin()
	s, err := reg.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range reg.All() {
		for _, gvk := range p.InfraKinds() {
			if _, err := s.New(gvk); err != nil {
				t.Errorf("the registry's scheme cannot make a %s: %v", gvk, err)
			}
		}
	}
	if again, _ := reg.Scheme(); again != s {
		t.Error("Scheme built twice")
	}

	broken := provider.Sim()
	broken.AddToScheme = func(*runtime.Scheme) error { return errors.New("boom") }
	r, err := provider.NewRegistry(broken)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Scheme(); err == nil || !strings.Contains(err.Error(), "provider sim") || !strings.Contains(err.Error(), "boom") {
		t.Errorf("a provider whose types do not register: %v", err)
	}
}
