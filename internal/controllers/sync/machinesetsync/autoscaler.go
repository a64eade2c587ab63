package machinesetsync

import (
	"context"
	"encoding/json"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/sync/internal/synccommon"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/patch"
)

// The cluster autoscaler works with one API's MachineSets whichever API is authoritative
// (OpenShift's with the Machine API's), so it may scale a mirror. The sync recognises its write
// by the field manager that owns spec.replicas in the mirror's managedFields: a write by
// anyone else takes the field over, and the sync then overwrites it as drift. A change the
// authoritative copy has pending (not yet synchronised) wins over the autoscaler's.

// MarkRetry is how soon a scale-down waiting for its delete marks to be carried is tried again.
const MarkRetry = time.Second

// autoscalerReplicas carries a spec.replicas change the autoscaler wrote to the paused Cluster
// API mirror over to the authoritative Machine API MachineSet. A scale-down waits (wait true:
// the caller must not overwrite the mirror meanwhile) until every Machine the autoscaler marked
// on the Cluster API side carries the mark on the Machine API side too, or the Machine API
// MachineSet would pick another Machine.
func (r *Reconciler) autoscalerReplicas(ctx context.Context, s *synccommon.Scope, mapi *machinev1beta1.MachineSet, capi *clusterv1.MachineSet) (wait bool, err error) {
	if capi.Spec.Replicas == nil || ptr.Equal(capi.Spec.Replicas, mapi.Spec.Replicas) ||
		mapi.Status.SynchronizedGeneration != mapi.Generation || !r.autoscalerOwns(capi.ManagedFields) {
		return false, nil
	}
	from := ptr.Deref(mapi.Spec.Replicas, 1)
	if *capi.Spec.Replicas < from {
		if pending, err := r.marksPendingToMAPI(ctx, capi); pending || err != nil {
			return pending, err
		}
	}
	// Stored at once: the conversion that follows records the generation this write gives.
	mapi.Spec.Replicas = ptr.To(*capi.Spec.Replicas)
	if err := s.StoreSpec(ctx); err != nil {
		return false, err
	}
	r.event(mapi, corev1.EventTypeNormal, "AutoscalerReplicas",
		"The cluster autoscaler (%s) set replicas of Cluster API MachineSet %s/%s to %d; scaling from %d", r.autoscalerManager(),
		capi.Namespace, capi.Name, *capi.Spec.Replicas, from)
	return false, nil
}

// autoscalerReplicasToCAPI is the other direction: a spec.replicas change the autoscaler wrote
// to the Machine API mirror of an authoritative Cluster API MachineSet goes onto that
// MachineSet, which then scales. A change of the Cluster API copy not yet synchronised
// (status.synchronizedGeneration behind its generation) wins. A scale-down waits, as above,
// for the autoscaler's marks on the Machine API Machines to reach the Cluster API Machines.
func (r *Reconciler) autoscalerReplicasToCAPI(ctx context.Context, mapi *machinev1beta1.MachineSet, capi *clusterv1.MachineSet) (wait bool, err error) {
	if mapi.Spec.Replicas == nil || ptr.Equal(capi.Spec.Replicas, mapi.Spec.Replicas) ||
		mapi.Status.SynchronizedGeneration != capi.Generation || !r.autoscalerOwns(mapi.ManagedFields) {
		return false, nil
	}
	from := ptr.Deref(capi.Spec.Replicas, 1)
	if *mapi.Spec.Replicas < from {
		if pending, err := r.marksPendingToCAPI(ctx, mapi); pending || err != nil {
			return pending, err
		}
	}
	base := capi.DeepCopy()
	capi.Spec.Replicas = ptr.To(*mapi.Spec.Replicas)
	if err := patch.Store(ctx, r.Client, capi, base); err != nil {
		return false, err
	}
	r.event(mapi, corev1.EventTypeNormal, "AutoscalerReplicas",
		"The cluster autoscaler (%s) set replicas of this Machine API MachineSet to %d; scaling Cluster API MachineSet %s/%s from %d",
		r.autoscalerManager(), *mapi.Spec.Replicas, capi.Namespace, capi.Name, from)
	return false, nil
}

// autoscalerManager is the autoscaler's field manager.
func (r *Reconciler) autoscalerManager() string {
	if r.AutoscalerFieldManager == "" {
		return manager.DefaultAutoscalerFieldManager
	}
	return r.AutoscalerFieldManager
}

// autoscalerOwns reports whether spec.replicas is owned, in these managedFields, by the
// autoscaler's field manager and no other.
func (r *Reconciler) autoscalerOwns(entries []metav1.ManagedFieldsEntry) bool {
	owners := ReplicasOwners(entries)
	for _, o := range owners {
		if o != r.autoscalerManager() {
			return false
		}
	}
	return len(owners) > 0
}

// ReplicasOwners lists the field managers whose managedFields entries own spec.replicas.
func ReplicasOwners(entries []metav1.ManagedFieldsEntry) []string {
	var owners []string
	for _, e := range entries {
		if e.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Spec map[string]json.RawMessage `json:"f:spec"`
		}
		if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields); err != nil {
			continue
		}
		if _, ok := fields.Spec["f:replicas"]; ok {
			owners = append(owners, e.Manager)
		}
	}
	return owners
}

// getMachine reads a Machine of either API; false when it does not exist.
func (r *Reconciler) getMachine(ctx context.Context, key client.ObjectKey, m client.Object) (bool, error) {
	err := r.Client.Get(ctx, key, m)
	if err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return true, nil
}
