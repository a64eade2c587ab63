package machinesetsync

import (
	"context"
	"encoding/json"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/patch"
)

// autoscalerReplicas carries a spec.replicas change the cluster autoscaler wrote to the
// paused Cluster API mirror over to the authoritative Machine API MachineSet, so that the
// autoscaler, which works with Cluster API MachineSets, can scale a MachineSet the Machine API
// still runs. The autoscaler is recognised by the field manager that owns spec.replicas in the
// mirror's managedFields: a write by anyone else takes the field over, and the sync then
// overwrites it as drift. A change the Machine API copy has pending (generation not yet
// synchronised) wins over the autoscaler's. It reports whether it wrote.
func (r *Reconciler) autoscalerReplicas(ctx context.Context, mapi *machinev1beta1.MachineSet, capi *clusterv1.MachineSet) (bool, error) {
	if capi.Spec.Replicas == nil || ptr.Equal(capi.Spec.Replicas, mapi.Spec.Replicas) ||
		mapi.Status.SynchronizedGeneration != mapi.Generation {
		return false, nil
	}
	want := r.AutoscalerFieldManager
	if want == "" {
		want = manager.DefaultAutoscalerFieldManager
	}
	owners := ReplicasOwners(capi.ManagedFields)
	if len(owners) == 0 {
		return false, nil
	}
	for _, o := range owners {
		if o != want {
			return false, nil
		}
	}
	base := mapi.DeepCopy()
	from := ptr.Deref(mapi.Spec.Replicas, 1)
	mapi.Spec.Replicas = ptr.To(*capi.Spec.Replicas)
	if err := patch.Store(ctx, r.Client, mapi, base); err != nil {
		return false, err
	}
	r.event(mapi, corev1.EventTypeNormal, "AutoscalerReplicas",
		"The cluster autoscaler (%s) set replicas of Cluster API MachineSet %s/%s to %d; scaling from %d", want,
		capi.Namespace, capi.Name, *capi.Spec.Replicas, from)
	return true, nil
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
