// Package platform defines how an infrastructure platform is described to machina. A Provider
// names the platform's kinds in both APIs, the finalizers its Cluster API controller puts on
// InfraMachines and how that controller acknowledges a pause, the Infrastructure platform
// types of clusters on it, and how to build the conversion context of such a cluster, online
// (NewContext, which reads the cluster) and offline (the hooks of `machina convert` and
// `machina plan -f`, which read manifests).
//
// Each platform's package under internal/convert/providers exports its Provider beside its
// conversion code, taking the InfraMachine and InfraMachineTemplate kinds from the same
// convert.InfraKinds its convert.Platform uses, so a platform is described once. The package
// knows no platform and no registry: internal/provider gathers the built-in Providers into the
// Registry the rest of machina looks platforms up in, and the conversion packages depend on
// this package only, never on the registry.
package platform

import (
	"context"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
)

// Provider describes one infrastructure platform to machina. A platform's conversion package
// builds it (internal/convert/providers/<name>.Provider); the rest of machina reads it through
// internal/provider, whose provider.Provider it is.
type Provider struct {
	// Name is the platform's short name, e.g. "aws"; it matches convert.Platform.Name.
	Name string
	// ProviderSpecKinds are the kinds of Machine API providerSpec values on this platform.
	ProviderSpecKinds []string
	// InfraMachine, InfraMachineTemplate and InfraCluster are the Cluster API infrastructure
	// kinds of the platform's provider.
	InfraMachine, InfraMachineTemplate, InfraCluster schema.GroupVersionKind
	// InfraMachineFinalizers are the finalizers the provider's controller puts on its
	// InfraMachines. When the Machine API takes a Machine back they are removed from the
	// paused InfraMachine: its controller no longer acts on it and would hold its deletion.
	InfraMachineFinalizers []string
	// PauseAckAnnotation is, for a provider whose controller writes no Paused condition, an
	// annotation it keeps on every InfraMachine it acts on and removes in the pass that finds
	// the InfraMachine paused: its absence from a paused InfraMachine carrying one of
	// InfraMachineFinalizers acknowledges the pause (how clusterctl move reads CAPZ's
	// clusterctl.cluster.x-k8s.io/block-move). Empty: only a Paused condition acknowledges.
	PauseAckAnnotation string
	// PauseAckByOperator is set for a provider whose controller acknowledges a pause in no way
	// (no Paused condition, no PauseAckAnnotation): an operator who has made sure the
	// provider's controller no longer acts on a paused InfraMachine says so with
	// machina.dev/provider-paused (authority.ProviderPausedAnnotation), which a handover to
	// the Machine API then takes as the acknowledgement.
	PauseAckByOperator bool
	// PlatformTypes are the Infrastructure status.platformStatus.type values of clusters
	// running on this platform.
	PlatformTypes []configv1.PlatformType
	// NewContext builds the conversion context of the cluster described by infra, whose
	// Cluster API objects live in clusterAPINamespace. It may read further cluster-wide
	// objects (the Cluster and its InfraCluster) through c.
	NewContext func(ctx context.Context, c client.Reader, infra *configv1.Infrastructure, clusterAPINamespace string) (convert.Context, error)

	// The hooks below serve offline conversion (`machina convert`, `machina plan -f`), which
	// reads no cluster: everything it knows comes from manifests.

	// AddToScheme registers the provider's Go types for its infrastructure kinds, so manifests
	// of these kinds decode into typed objects.
	AddToScheme func(*runtime.Scheme) error
	// NewPlatform returns the conversion platform of a cluster in region.
	NewPlatform func(region string) (convert.Platform, error)
	// Regionless is true for a platform whose conversion needs no cluster region (on
	// OpenStack the clouds secret names it): offline conversion asks for none, passes "" to
	// NewPlatform and leaves RegionOf, SpecRegion and ZoneRegion unused.
	Regionless bool
	// RegionOf reads the cluster's region from a cluster-wide object: the OpenShift
	// Infrastructure or the provider's InfraCluster. It returns "" when obj does not say
	// (another kind, another platform, or the field is unset).
	RegionOf func(obj client.Object) string
	// SpecRegion reads the region a providerSpec value of this platform names ("" when it
	// names none or does not parse).
	SpecRegion func(raw []byte) string
	// MatchesKindlessSpec reports whether a providerSpec value that has no kind looks like
	// this platform's, by the fields only it has.
	MatchesKindlessSpec func(raw []byte) bool
	// ZoneRegion, when set, names the region a failure domain (zone) lies in ("" when it
	// cannot tell), so Cluster API input names its region as Machine API input does.
	ZoneRegion func(zone string) string
	// ApplyClusterObject, when set, returns the platform with what a cluster-wide object (the
	// Infrastructure or the platform's InfraCluster) says beyond the region, e.g. AWS's
	// ipFamily and control-plane load balancers. Objects it does not know leave p unchanged.
	ApplyClusterObject func(p convert.Platform, obj client.Object) convert.Platform
}

// InfraKinds are the provider's Cluster API kinds, for messages and matching.
func (p Provider) InfraKinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{p.InfraMachine, p.InfraMachineTemplate, p.InfraCluster}
}

// Regional adapts a platform's constructor, New(region) (P, error), to Provider.NewPlatform:
// when New fails the platform returned is nil, not a zero P.
func Regional[P convert.Platform](newPlatform func(region string) (P, error)) func(region string) (convert.Platform, error) {
	return func(region string) (convert.Platform, error) {
		p, err := newPlatform(region)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}

// ApplyWith adapts a platform's With methods to Provider.ApplyClusterObject: withInfra takes
// what the Infrastructure says (nil when it says nothing more), withCluster what the
// platform's InfraCluster C says. Any other object, or a platform other than a P, leaves the
// platform unchanged.
func ApplyWith[P convert.Platform, C client.Object](withInfra func(P, *configv1.Infrastructure) P, withCluster func(P, C) P) func(convert.Platform, client.Object) convert.Platform {
	return func(p convert.Platform, obj client.Object) convert.Platform {
		pp, ok := p.(P)
		if !ok {
			return p
		}
		switch o := obj.(type) {
		case *configv1.Infrastructure:
			if withInfra != nil {
				return withInfra(pp, o)
			}
		case C:
			return withCluster(pp, o)
		}
		return p
	}
}
