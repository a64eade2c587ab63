// Package provider is the one place machina's platform-neutral parts — the sync and migration
// controllers, `machina plan`, `describe` and `convert`, the operator metrics — learn about
// infrastructure platforms. A Provider names a platform's kinds in both APIs, the finalizers
// its Cluster API controller puts on InfraMachines, and how to build the conversion context of
// a cluster on it. Adding a platform means adding its conversion package
// (internal/convert/providers/<name>) and one file here; nothing in the core changes.
package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/scheme"
)

// Provider describes one infrastructure platform.
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
	// machina.dev/provider-paused (synccommon.ProviderPausedAnnotation), which a handover to
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

// SpecKind reads the kind of a Machine API providerSpec value ("" when it has none).
func SpecKind(ps machinev1beta1.ProviderSpec) string {
	if ps.Value == nil {
		return ""
	}
	if ps.Value.Raw == nil {
		if ps.Value.Object != nil {
			return ps.Value.Object.GetObjectKind().GroupVersionKind().Kind
		}
		return ""
	}
	var tm struct{ Kind string }
	_ = json.Unmarshal(ps.Value.Raw, &tm) // a malformed value has no kind; conversion reports it
	return tm.Kind
}

// Registry is the set of platforms machina knows, built once and passed to whatever needs it.
type Registry struct {
	providers []Provider

	schemeOnce sync.Once
	scheme     *runtime.Scheme
	schemeErr  error
}

// NewRegistry returns a registry of the given providers; names and kinds must not repeat.
func NewRegistry(ps ...Provider) (*Registry, error) {
	r := &Registry{}
	seen := map[string]string{}
	for _, p := range ps {
		keys := append([]string{"name " + p.Name}, prefixed("providerSpec kind ", p.ProviderSpecKinds)...)
		for _, gvk := range p.InfraKinds() {
			keys = append(keys, "kind "+gvk.GroupKind().String())
		}
		for _, k := range keys {
			if other, dup := seen[k]; dup {
				return nil, fmt.Errorf("providers %s and %s share %s", other, p.Name, k)
			}
			seen[k] = p.Name
		}
		r.providers = append(r.providers, p)
	}
	return r, nil
}

func prefixed(prefix string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = prefix + s
	}
	return out
}

// Builtin returns the platforms built into machina: the simulated cloud, AWS, OpenStack, GCP,
// Azure, PowerVS and vSphere.
func Builtin() *Registry {
	r, err := NewRegistry(Sim(), AWS(), OpenStack(), GCP(), Azure(), PowerVS(), VSphere())
	if err != nil {
		panic(err) // a programming error in this package, caught by its tests
	}
	return r
}

// All returns every provider, in registration order.
func (r *Registry) All() []Provider { return slices.Clone(r.providers) }

// Scheme returns a scheme with every type of internal/scheme and every provider's
// infrastructure types. It is built on first use and shared; callers must not change it.
func (r *Registry) Scheme() (*runtime.Scheme, error) {
	r.schemeOnce.Do(func() {
		s := scheme.New()
		for _, p := range r.providers {
			if p.AddToScheme == nil {
				continue
			}
			if err := p.AddToScheme(s); err != nil {
				r.schemeErr = fmt.Errorf("provider %s: registering its types: %w", p.Name, err)
				return
			}
		}
		r.scheme = s
	})
	return r.scheme, r.schemeErr
}

// Names returns the providers' names, for messages.
func (r *Registry) Names() []string {
	out := make([]string, len(r.providers))
	for i, p := range r.providers {
		out[i] = p.Name
	}
	return out
}

// ForProviderSpecKind finds the platform of a Machine API providerSpec kind.
func (r *Registry) ForProviderSpecKind(kind string) (Provider, error) {
	for _, p := range r.providers {
		if slices.Contains(p.ProviderSpecKinds, kind) {
			return p, nil
		}
	}
	if kind == "" {
		return Provider{}, fmt.Errorf("the providerSpec value has no kind")
	}
	return Provider{}, fmt.Errorf("no platform converts providerSpec kind %q (known: %s)", kind, strings.Join(r.specKinds(), ", "))
}

func (r *Registry) specKinds() []string {
	var out []string
	for _, p := range r.providers {
		out = append(out, p.ProviderSpecKinds...)
	}
	return out
}

// ForInfraKind finds the platform of a Cluster API infrastructure kind (InfraMachine,
// InfraMachineTemplate or InfraCluster). An empty group matches any group.
func (r *Registry) ForInfraKind(gk schema.GroupKind) (Provider, error) {
	for _, p := range r.providers {
		for _, k := range p.InfraKinds() {
			if k.Kind == gk.Kind && (gk.Group == "" || gk.Group == k.Group) {
				return p, nil
			}
		}
	}
	return Provider{}, fmt.Errorf("no platform provides infrastructure kind %s", gk)
}

// ForRef finds the platform of a Cluster API contract reference (e.g. a Machine's
// spec.infrastructureRef).
func (r *Registry) ForRef(ref clusterv1.ContractVersionedObjectReference) (Provider, error) {
	return r.ForInfraKind(schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind})
}

// ForInfrastructure finds the platform an OpenShift Infrastructure object says the cluster
// runs on.
func (r *Registry) ForInfrastructure(infra *configv1.Infrastructure) (Provider, error) {
	var t configv1.PlatformType
	if infra.Status.PlatformStatus != nil {
		t = infra.Status.PlatformStatus.Type
	}
	for _, p := range r.providers {
		if slices.Contains(p.PlatformTypes, t) {
			return p, nil
		}
	}
	return Provider{}, fmt.Errorf("the Infrastructure %s: no platform for status.platformStatus.type %q", infra.Name, t)
}

// Context reads the cluster's Infrastructure object and builds the conversion context of
// platform p with the given namespace pair.
func Context(ctx context.Context, c client.Reader, p Provider, ns convert.Namespaces) (convert.Context, error) {
	return ContextWith(ctx, c, p, Settings{Namespaces: ns})
}

// Settings are the parts of a conversion context that come from configuration (flags) rather
// than from the cluster's objects.
type Settings struct {
	// Namespaces is the namespace pair.
	Namespaces convert.Namespaces
	// AdditionalSyncMachineLabels are the patterns of --additional-sync-machine-labels (see
	// convert.Context).
	AdditionalSyncMachineLabels []*regexp.Regexp
}

// ContextWith reads the cluster's Infrastructure object and builds the conversion context of
// platform p with the given settings.
func ContextWith(ctx context.Context, c client.Reader, p Provider, s Settings) (convert.Context, error) {
	infra := &configv1.Infrastructure{}
	if err := c.Get(ctx, client.ObjectKey{Name: "cluster"}, infra); err != nil {
		return convert.Context{}, fmt.Errorf("reading Infrastructure cluster: %w", err)
	}
	cc, err := p.NewContext(ctx, c, infra, s.Namespaces.ClusterAPI)
	if err != nil {
		return convert.Context{}, err
	}
	cc.Namespaces = s.Namespaces
	cc.AdditionalSyncMachineLabels = s.AdditionalSyncMachineLabels
	return cc, nil
}

// statusOrInfraCluster is the context builder of the platforms whose Infrastructure status
// gives the context and whose InfraCluster (cl, of kind), when the cluster has one, adds to
// it: with the platform's status, fromStatus builds the context and apply (the platform's
// ApplyClusterObject) adds the InfraCluster unless the cluster has none (any other error
// reading it is returned); without that status, the InfraCluster alone gives the context
// (fromCluster).
func statusOrInfraCluster[T client.Object](ctx context.Context, c client.Reader, infra *configv1.Infrastructure, ns string,
	platform configv1.PlatformType, cl T, kind string,
	fromStatus func(*configv1.Infrastructure) (convert.Context, error),
	apply func(convert.Platform, client.Object) convert.Platform,
	fromCluster func(clusterName string, cl T) (convert.Context, error)) (convert.Context, error) {
	name, err := convert.ClusterNameFromInfrastructure(infra)
	if err != nil {
		return convert.Context{}, err
	}
	clErr := InfraCluster(ctx, c, ns, name, cl, kind)
	if ps := infra.Status.PlatformStatus; ps != nil && ps.Type == platform {
		cc, err := fromStatus(infra)
		if err != nil {
			return convert.Context{}, err
		}
		switch {
		case clErr == nil:
			cc.Platform = apply(cc.Platform, cl)
		case !absent(clErr):
			return convert.Context{}, clErr
		}
		return cc, nil
	}
	if clErr != nil {
		return convert.Context{}, clErr
	}
	return fromCluster(name, cl)
}

// absent reports whether reading the cluster's InfraCluster failed because there is none: no
// Cluster, a Cluster on another kind of InfraCluster, no such object, or no such CRD.
func absent(err error) bool {
	return apierrors.IsNotFound(err) || meta.IsNoMatchError(err) || errors.Is(err, ErrOtherInfraKind)
}

// ErrOtherInfraKind is wrapped by InfraCluster's error when the Cluster references an
// InfraCluster of another kind than asked for.
var ErrOtherInfraKind = errors.New("another infrastructure kind")

// InfraCluster reads the InfraCluster the Cluster API Cluster named clusterName in ns points
// at into out, checking that it is of out's kind.
func InfraCluster(ctx context.Context, c client.Reader, ns, clusterName string, out client.Object, kind string) error {
	cluster := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: clusterName}, cluster); err != nil {
		return fmt.Errorf("reading Cluster %s/%s: %w", ns, clusterName, err)
	}
	ref := cluster.Spec.InfrastructureRef
	if ref.Kind != kind {
		return fmt.Errorf("the Cluster %s/%s: spec.infrastructureRef is %q, not a %s: %w", ns, clusterName, ref.Kind, kind, ErrOtherInfraKind)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, out); err != nil {
		return fmt.Errorf("reading %s %s/%s: %w", kind, ns, ref.Name, err)
	}
	return nil
}
