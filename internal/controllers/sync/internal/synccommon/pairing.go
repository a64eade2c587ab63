package synccommon

import (
	"context"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/provider"
)

// UnpausedAtPairingReason is the event the sync records on the Machine API copy when it
// unpauses its authoritative Cluster API copy at pairing (UnpauseAtPairing).
const UnpausedAtPairingReason = "UnpausedAtPairing"

// UnpauseAtPairing reports whether an authoritative Cluster API copy is to be unpaused as the
// sync pairs it with its Machine API copy. Pairing is the write that gives the Cluster API
// copy the sync finalizer, which it lacks only before its first pairing: it was created
// paused by somebody, or it is a mirror a former sync let go paused (Release). If the Machine
// API copy then says the Cluster API is authoritative (status ClusterAPI, not Migrating),
// nothing else would ever unpause it and nobody would act on the resource. A copy paired
// already keeps a pause somebody puts on it later: that one is deliberate.
func UnpauseAtPairing(status machinev1beta1.MachineAuthority, capi client.Object) bool {
	return status == machinev1beta1.MachineAuthorityClusterAPI && capi.GetDeletionTimestamp().IsZero() &&
		!controllerutil.ContainsFinalizer(capi, authority.SyncFinalizer) && gate.HasPausedAnnotation(capi)
}

// UnpauseInfra takes the paused annotation off the infrastructure object ref names in ns (its
// kind, kindOf picks from the platform providing ref's kind: InfraMachine or
// InfraMachineTemplate). In the same write it gets its provider's guard (authority.ProviderGuard of
// finalizers): an unpaused InfraMachine never lacks it, or a deletion before the provider's
// first pass would take it away with its instance still running. An object that is gone, or
// of a kind no platform provides, is nothing to unpause; one being deleted is an error
// (authority.StorePaused).
func UnpauseInfra(ctx context.Context, c client.Client, reg *provider.Registry, ns string, ref clusterv1.ContractVersionedObjectReference,
	kindOf func(provider.Provider) schema.GroupVersionKind, finalizers func(provider.Provider) []string) error {
	obj, p, err := authority.InfraMetadata(ctx, c, reg, ns, ref, kindOf)
	if obj == nil || err != nil {
		return err
	}
	return authority.StorePaused(ctx, c, obj, false, authority.ProviderGuard(obj, finalizers(p)))
}
