package authority

import (
	"context"
	"fmt"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/provider"
)

// ProviderSpecKind reads the kind of a providerSpec value.
func ProviderSpecKind(ps machinev1beta1.ProviderSpec) string { return provider.SpecKind(ps) }

// PlatformOf finds the platform of a Machine API providerSpec kind or a Cluster API
// infrastructure kind in the registry.
func PlatformOf(reg *provider.Registry, kind string) (provider.Provider, error) {
	if p, err := reg.ForProviderSpecKind(kind); err == nil {
		return p, nil
	}
	if p, err := reg.ForInfraKind(schema.GroupKind{Kind: kind}); err == nil {
		return p, nil
	}
	return provider.Provider{}, fmt.Errorf("no conversion for platform kind %q (platforms: %s)", kind, strings.Join(reg.Names(), ", "))
}

// ContextFor builds the conversion context of the cluster for a platform, given by a
// Machine API providerSpec kind or a Cluster API InfraMachine(Template) kind.
func ContextFor(ctx context.Context, c client.Reader, reg *provider.Registry, ns Namespaces, kind string) (convert.Context, error) {
	p, err := PlatformOf(reg, kind)
	if err != nil {
		return convert.Context{}, err
	}
	return PlatformContext(ctx, c, p, ns)
}

// PlatformContext builds the conversion context of the cluster for platform p.
func PlatformContext(ctx context.Context, c client.Reader, p provider.Provider, ns Namespaces) (convert.Context, error) {
	return provider.ContextWith(ctx, c, p, provider.Settings{
		Namespaces:                  convert.Namespaces{MachineAPI: ns.MachineAPI, ClusterAPI: ns.ClusterAPI},
		AdditionalSyncMachineLabels: ns.AdditionalSyncMachineLabels,
	})
}

// ClusterContext is the conversion context without a platform, for MachineHealthChecks.
func ClusterContext(ctx context.Context, c client.Reader, ns Namespaces) (convert.Context, error) {
	infra := &configv1.Infrastructure{}
	if err := c.Get(ctx, client.ObjectKey{Name: "cluster"}, infra); err != nil {
		return convert.Context{}, fmt.Errorf("reading Infrastructure cluster: %w", err)
	}
	name, err := convert.ClusterNameFromInfrastructure(infra)
	if err != nil {
		return convert.Context{}, err
	}
	return convert.Context{ClusterName: name, Namespaces: convert.Namespaces{MachineAPI: ns.MachineAPI, ClusterAPI: ns.ClusterAPI}}, nil
}
