// Package synccommon holds what the sync controllers share: the sync finalizer, the
// Synchronized condition, the namespace pair, and building the conversion context (cluster
// name, platform) through the provider registry.
package synccommon

import (
	"context"
	"fmt"
	"sort"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/provider"
)

// SyncFinalizer lets the sync controller carry a deletion across to the mirror before either
// object goes.
const SyncFinalizer = gate.SyncFinalizer

// SynchronizedCondition on a Machine API object says whether its mirror matches.
const SynchronizedCondition machinev1beta1.ConditionType = "Synchronized"

// Reasons of the Synchronized condition.
const (
	ConversionFailedReason = "ConversionFailed"
	SynchronizedReason     = "ResourceSynchronized"
	NoContextReason        = "ClusterNotReady"
)

// Namespaces is where each API's copies live.
type Namespaces struct {
	MachineAPI string
	ClusterAPI string
}

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
	return provider.Context(ctx, c, p, convert.Namespaces{MachineAPI: ns.MachineAPI, ClusterAPI: ns.ClusterAPI})
}

// SetSynchronized records the outcome of a sync on a Machine API object's conditions.
func SetSynchronized(conds *[]machinev1beta1.Condition, reason string, errs field.ErrorList, detail error) bool {
	c := machinev1beta1.Condition{Type: SynchronizedCondition, Status: corev1.ConditionTrue, Reason: SynchronizedReason}
	switch {
	case len(errs) > 0:
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Error()
		}
		sort.Strings(msgs)
		c.Status, c.Reason, c.Severity = corev1.ConditionFalse, reason, machinev1beta1.ConditionSeverityError
		c.Message = strings.Join(msgs, "; ")
	case detail != nil:
		c.Status, c.Reason, c.Severity = corev1.ConditionFalse, reason, machinev1beta1.ConditionSeverityWarning
		c.Message = detail.Error()
	}
	return mapicond.Set(conds, c)
}

// SetPaused adds or removes the Cluster API paused annotation, reporting a change.
func SetPaused(o client.Object, paused bool) bool {
	a := o.GetAnnotations()
	_, has := a[clusterv1.PausedAnnotation]
	if has == paused {
		return false
	}
	if paused {
		if a == nil {
			a = map[string]string{}
		}
		a[clusterv1.PausedAnnotation] = ""
	} else {
		delete(a, clusterv1.PausedAnnotation)
	}
	o.SetAnnotations(a)
	return true
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
