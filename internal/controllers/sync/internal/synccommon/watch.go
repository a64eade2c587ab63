package synccommon

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/controllers/internal/pairwatch"
	"github.com/machina-dev/machina/internal/provider"
)

// InstalledKinds returns the kinds among gvks whose CRDs the apiserver serves. A platform's
// kinds are watched only where its provider's CRDs are installed: a cluster on AWS has no
// simulated provider CRDs, and a watch of a missing kind would stop the manager from starting.
func InstalledKinds(mapper meta.RESTMapper, gvks ...schema.GroupVersionKind) ([]schema.GroupVersionKind, error) {
	var out []schema.GroupVersionKind
	for _, gvk := range gvks {
		_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		switch {
		case err == nil:
			out = append(out, gvk)
		case !meta.IsNoMatchError(err):
			return nil, fmt.Errorf("looking up %s: %w", gvk, err)
		}
	}
	return out, nil
}

// WatchInfra adds a metadata-only watch, mapped by h, of each registered platform's kind that
// kindOf picks and the apiserver serves, in namespace ns.
func WatchInfra(b *builder.Builder, mapper meta.RESTMapper, reg *provider.Registry, kindOf func(provider.Provider) schema.GroupVersionKind,
	h handler.EventHandler, ns string) (*builder.Builder, error) {
	return watchInstalled(b, mapper, reg, kindOf, func(b *builder.Builder, gvk schema.GroupVersionKind) (*builder.Builder, error) {
		return b.WatchesMetadata(authority.Metadata(gvk), h, pairwatch.InNamespace(ns)), nil
	})
}

// WatchInfraObjects is WatchInfra with whole objects, for a controller that reads the kind
// whole (typed, through the manager's scheme): the pass an event brings then reads the very
// cache the event came from. A metadata watch beside typed reads is a second informer; when
// it is ahead, the pass works from the older object and no later event corrects it.
func WatchInfraObjects(b *builder.Builder, mapper meta.RESTMapper, scheme *runtime.Scheme, reg *provider.Registry,
	kindOf func(provider.Provider) schema.GroupVersionKind, h handler.EventHandler, ns string) (*builder.Builder, error) {
	return watchInstalled(b, mapper, reg, kindOf, func(b *builder.Builder, gvk schema.GroupVersionKind) (*builder.Builder, error) {
		obj, err := scheme.New(gvk)
		if err != nil {
			return nil, fmt.Errorf("watching %s: %w", gvk, err)
		}
		return b.Watches(obj.(client.Object), h, pairwatch.InNamespace(ns)), nil
	})
}

// watchInstalled adds, with watch, a watch of each registered platform's kind that kindOf
// picks and the apiserver serves.
func watchInstalled(b *builder.Builder, mapper meta.RESTMapper, reg *provider.Registry, kindOf func(provider.Provider) schema.GroupVersionKind,
	watch func(*builder.Builder, schema.GroupVersionKind) (*builder.Builder, error)) (*builder.Builder, error) {
	var gvks []schema.GroupVersionKind
	for _, p := range reg.All() {
		gvks = append(gvks, kindOf(p))
	}
	installed, err := InstalledKinds(mapper, gvks...)
	if err != nil {
		return nil, err
	}
	for _, gvk := range installed {
		if b, err = watch(b, gvk); err != nil {
			return nil, err
		}
	}
	return b, nil
}
