package synccommon

import (
	"context"
	"fmt"
	"slices"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/patch"
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
		!controllerutil.ContainsFinalizer(capi, SyncFinalizer) && gate.HasPausedAnnotation(capi)
}

// UnpauseInfra takes the paused annotation off the infrastructure object ref names in ns (its
// kind, kindOf picks from the platform providing ref's kind: InfraMachine or
// InfraMachineTemplate). In the same write it gets its provider's guard (ProviderGuard of
// finalizers): an unpaused InfraMachine never lacks it, or a deletion before the provider's
// first pass would take it away with its instance still running. An object that is gone, or
// of a kind no platform provides, is nothing to unpause; one being deleted is an error
// (StorePaused).
func UnpauseInfra(ctx context.Context, c client.Client, reg *provider.Registry, ns string, ref clusterv1.ContractVersionedObjectReference,
	kindOf func(provider.Provider) schema.GroupVersionKind, finalizers func(provider.Provider) []string) error {
	obj, p, err := InfraMetadata(ctx, c, reg, ns, ref, kindOf)
	if obj == nil || err != nil {
		return err
	}
	return StorePaused(ctx, c, obj, false, ProviderGuard(obj, finalizers(p)))
}

// StorePaused sets or clears the paused annotation on o and, when finalizer is not empty,
// adds it in the same locked write. An object being deleted is not unpaused (its controller
// would act on the deletion, which the sync settles first): that is an error. A gone object
// is nothing to do.
func StorePaused(ctx context.Context, c client.Client, o client.Object, paused bool, finalizer string) error {
	if !paused && !o.GetDeletionTimestamp().IsZero() {
		return fmt.Errorf("not unpausing %s %s/%s: it is being deleted", kindOf(o), o.GetNamespace(), o.GetName())
	}
	_, err := patch.Locked(ctx, c, o, func() bool {
		changed := SetPaused(o, paused)
		if finalizer != "" {
			changed = controllerutil.AddFinalizer(o, finalizer) || changed
		}
		return changed
	})
	return client.IgnoreNotFound(err)
}

// ProviderGuard is the finalizer an infrastructure object whose provider sets one of
// finalizers is given when it is unpaused: the first of them, unless it carries one already
// ("" then, or when the provider sets none).
func ProviderGuard(o client.Object, finalizers []string) string {
	if len(finalizers) == 0 || slices.ContainsFunc(finalizers, func(f string) bool { return controllerutil.ContainsFinalizer(o, f) }) {
		return ""
	}
	return finalizers[0]
}

// kindOf names o's kind for a message: its GroupVersionKind's, else its Go type.
func kindOf(o client.Object) string {
	if k := o.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	return fmt.Sprintf("%T", o)
}

// InfraMetadata reads the metadata of the infrastructure object ref names in ns, as the kind
// kindOf picks from the platform providing ref's kind. It returns nil and no error when no
// platform provides the kind (the sync never mirrored it either) or the object is gone.
func InfraMetadata(ctx context.Context, c client.Reader, reg *provider.Registry, ns string, ref clusterv1.ContractVersionedObjectReference,
	kindOf func(provider.Provider) schema.GroupVersionKind) (*metav1.PartialObjectMetadata, provider.Provider, error) {
	p, err := reg.ForRef(ref)
	if err != nil {
		return nil, provider.Provider{}, nil
	}
	obj := Metadata(kindOf(p))
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, obj); err != nil {
		return nil, p, client.IgnoreNotFound(err)
	}
	return obj, p, nil
}
