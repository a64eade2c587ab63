// Package synccommon holds what the sync controllers share: the sync finalizer, the
// Synchronized condition, the namespace pair, and building the conversion context (cluster
// name, platform) through the provider registry; and the start check, shared with the
// migration, that the installed Machine API CRDs carry the authority fields (crdcheck.go).
package synccommon

import (
	"context"
	"fmt"
	"regexp"
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
	"github.com/machina-dev/machina/internal/patch"
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
	// MirrorWriteFailedReason: the apiserver refused a write of the other API's copy.
	MirrorWriteFailedReason = "MirrorWriteFailed"
	// TemplateNotFoundReason: the authoritative Cluster API MachineSet names an
	// InfraMachineTemplate that does not exist.
	TemplateNotFoundReason = "InfraMachineTemplateNotFound"
	// ClusterAPIMachineNotMirrorReason and ClusterAPIMachineSetNotMirrorReason: the Machine
	// API owns the resource, but a Cluster API resource of its name exists that is active
	// and is not the sync's mirror; the sync leaves it alone (NotMirror).
	ClusterAPIMachineNotMirrorReason    = "ClusterAPIMachineNotMirror"
	ClusterAPIMachineSetNotMirrorReason = "ClusterAPIMachineSetNotMirror"
)

// Namespaces is where each API's copies live.
type Namespaces struct {
	MachineAPI string
	ClusterAPI string
	// AdditionalSyncMachineLabels are the manager's --additional-sync-machine-labels: Node
	// labels outside the Cluster API's own domains that the conversion accepts on Machines.
	AdditionalSyncMachineLabels []*regexp.Regexp
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
	return provider.ContextWith(ctx, c, p, provider.Settings{
		Namespaces:                  convert.Namespaces{MachineAPI: ns.MachineAPI, ClusterAPI: ns.ClusterAPI},
		AdditionalSyncMachineLabels: ns.AdditionalSyncMachineLabels,
	})
}

// DecideAuthority initialises an empty status.authoritativeAPI of a Machine API Machine or
// MachineSet (status points at its status fields) from its spec, by the rule the Machine API
// controllers' gate follows (gate.InitialAuthority), in one locked status patch. The sync
// decides too because machina's Machine API controllers may not run beside it; when one of
// them decided first, the lock makes this write fail and the next pass sees the decision.
func DecideAuthority(ctx context.Context, c client.Client, mapi client.Object, spec machinev1beta1.MachineAuthority,
	status *machinev1beta1.MachineAuthority, synced *machinev1beta1.SynchronizedAPI) error {
	_, err := patch.LockedStatus(ctx, c, mapi, func() bool {
		*status = gate.InitialAuthority(spec)
		*synced = SynchronizedAPIOf(*status)
		return true
	})
	return err
}

// SynchronizedAPIOf is the status.synchronizedAPI value that goes with an authority.
func SynchronizedAPIOf(a machinev1beta1.MachineAuthority) machinev1beta1.SynchronizedAPI {
	if a == machinev1beta1.MachineAuthorityClusterAPI {
		return machinev1beta1.ClusterAPISynchronized
	}
	return machinev1beta1.MachineAPISynchronized
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

// ProviderPausedAnnotation is an operator's acknowledgement, on a paused InfraMachine whose
// provider reports no Paused condition (CAPO v0.13, CAPG v1.13), that the provider's
// controller is not acting on it: a handover to the Machine API then takes the pause as
// acknowledged (docs/migration.md). It answers one pause: pausing and unpausing remove it, so
// one set before the pause, or left from an earlier one, acknowledges nothing.
const ProviderPausedAnnotation = machinaDomain + "provider-paused"

// SetPaused adds or removes the Cluster API paused annotation, reporting a change. Either
// change removes an operator's ProviderPausedAnnotation, as does finding o unpaused with one.
func SetPaused(o client.Object, paused bool) bool {
	a := o.GetAnnotations()
	_, has := a[clusterv1.PausedAnnotation]
	_, acked := a[ProviderPausedAnnotation]
	if has == paused && (paused || !acked) {
		return false
	}
	delete(a, ProviderPausedAnnotation)
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

// Pause is what a sync pass does with the paused annotation of the copies it writes.
type Pause int

const (
	// PauseMirror pauses the written copies: they mirror the authoritative side.
	PauseMirror Pause = iota
	// Unpause leaves the written copies active: they are the authoritative side (a resource
	// born Cluster API-authoritative, whose Cluster API copy the sync creates).
	Unpause
	// KeepPause leaves the annotation as it is (new copies are created paused): a migration
	// is under way and the migration controller pauses and unpauses each side.
	KeepPause
)

// Apply sets o's paused annotation as p says, reporting a change.
func (p Pause) Apply(o client.Object) bool {
	switch p {
	case PauseMirror:
		return SetPaused(o, true)
	case Unpause:
		return SetPaused(o, false)
	}
	return false
}

// ForCreate is the paused state a new copy gets.
func (p Pause) ForCreate() bool { return p != Unpause }

// SyncSource is the side a sync pass takes the spec from, and what it does with the pause of
// the other side's copies. Outside a migration that is the authoritative side; while one is
// under way (status Migrating) the copies keep being synchronised from the side that was
// authoritative (status.synchronizedAPI), so a change made meanwhile — a scale by the
// autoscaler or a user, a late providerID — reaches the other side and the handover, which
// waits for the latest generation to be synchronised, moves on.
func SyncSource(status machinev1beta1.MachineAuthority, synchronizedAPI machinev1beta1.SynchronizedAPI) (machinev1beta1.MachineAuthority, Pause) {
	switch status {
	case machinev1beta1.MachineAuthorityMigrating:
		from := machinev1beta1.MachineAuthorityMachineAPI
		if synchronizedAPI == machinev1beta1.ClusterAPISynchronized {
			from = machinev1beta1.MachineAuthorityClusterAPI
		}
		return from, KeepPause
	case machinev1beta1.MachineAuthorityClusterAPI:
		return status, Unpause
	}
	return machinev1beta1.MachineAuthorityMachineAPI, PauseMirror
}
