// Package provider is the one place machina's platform-neutral parts — the sync and migration
// controllers, `machina plan`, `describe` and `convert`, the operator metrics — learn about
// infrastructure platforms: the Registry of Providers, with the lookups by providerSpec kind,
// infrastructure kind and Infrastructure platform type, the scheme of every platform's types,
// and the reading of a cluster's conversion context (ContextWith).
//
// A platform is described once, by its conversion package: internal/convert/providers/<name>
// exports Provider() next to its convert.Platform, from the same kinds (see package platform
// for what a Provider says). Adding a platform means writing that package and listing its
// Provider in Builtin (builtin.go); nothing else here or in the core changes.
package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/platform"
	"github.com/machina-dev/machina/internal/scheme"
)

// Provider describes one infrastructure platform. Each platform's conversion package
// (internal/convert/providers/<name>) builds its own; see package platform.
type Provider = platform.Provider

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
