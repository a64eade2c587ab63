package machinepool

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/labels/format"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/external"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/inplace"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/patch"
)

// reconcileMachines gives every InfraMachine of the pool a Machine and makes sure every
// Machine of the pool is controlled by it. Machines are named after their InfraMachine, so
// creating one is idempotent even when the cache has not seen an earlier creation yet.
// It returns the pool's Machines as they were listed: those it controls and those no one
// controls (one being deleted keeps no controller restored), which status.versions counts.
func (r *Reconciler) reconcileMachines(ctx context.Context, mp *clusterv1.MachinePool, infraPool *external.Object,
	kind string) ([]*clusterv1.Machine, error) {
	group := infraPool.GroupVersionKind().Group
	infraMachines, err := r.listInfraMachines(ctx, mp, group, kind)
	if err != nil {
		setCondition(mp, MachinesCreatedCondition, metav1.ConditionUnknown, "InternalError", err.Error())
		return nil, err
	}
	var machines clusterv1.MachineList
	if err := r.Client.List(ctx, &machines, client.InNamespace(mp.Namespace), poolLabels(mp)); err != nil {
		return nil, err
	}
	byInfra := map[string]*clusterv1.Machine{}
	pool := make([]*clusterv1.Machine, 0, len(machines.Items))
	members := make([]*clusterv1.Machine, 0, len(machines.Items))
	for i := range machines.Items {
		m := &machines.Items[i]
		if err := r.ensureControlled(ctx, mp, m); err != nil {
			return nil, err
		}
		ref := metav1.GetControllerOf(m)
		if ref != nil && ref.UID == mp.UID {
			pool = append(pool, m)
		}
		if ref == nil || ref.UID == mp.UID {
			members = append(members, m)
		}
		if infra := m.Spec.InfrastructureRef; infra.Kind == kind && infra.APIGroup == group {
			byInfra[infra.Name] = m
		}
	}
	// Template labels, annotations, minReadySeconds and deletion timeouts reach the existing
	// Machines in place (a health check selecting a new template label finds them); taints
	// do not, as in the Cluster API, which refuses them on a MachinePool's template.
	// A Machine that changed under the propagation gets it on the pool's next pass (a pool
	// not yet settled looks again within WaitRequeue, a settled one on the Machine's event).
	if _, _, err := inplace.Propagate(ctx, r.Client, pool, inplace.Template{Meta: mp.Spec.Template.ObjectMeta, Spec: &mp.Spec.Template.Spec}); err != nil {
		return nil, err
	}
	created := 0
	for i := range infraMachines {
		im := &infraMachines[i]
		if im.GetDeletionTimestamp() != nil || byInfra[im.GetName()] != nil || ownedByMachine(im) {
			continue
		}
		if err := r.createMachine(ctx, mp, im, group, kind); err != nil {
			setCondition(mp, MachinesCreatedCondition, metav1.ConditionFalse, "MachineCreationFailed",
				fmt.Sprintf("creating the Machine of %s %s: %v", kind, im.GetName(), err))
			return nil, err
		}
		created++
	}
	if created > 0 {
		events.Eventf(r.Recorder, mp, corev1.EventTypeNormal, "MachinesCreated", "Created %d Machine(s) for %s instances", created, kind)
	}
	setCondition(mp, MachinesCreatedCondition, metav1.ConditionTrue, "MachinesCreated",
		fmt.Sprintf("%d %s(s), one Machine each", len(infraMachines), kind))
	return members, nil
}

// ownedByMachine reports an InfraMachine that already has a Machine as owner (a Machine the
// cache may not show yet, or one that is not labelled as this pool's).
func ownedByMachine(im *unstructured.Unstructured) bool {
	for _, ref := range im.GetOwnerReferences() {
		if ref.Kind == "Machine" && schemaGroup(ref.APIVersion) == clusterv1.GroupVersion.Group {
			return true
		}
	}
	return false
}

func schemaGroup(apiVersion string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return ""
	}
	return gv.Group
}

// createMachine creates the Machine of one InfraMachine: controlled by the pool, labelled
// like it, pointing at the InfraMachine, without a bootstrap of its own.
func (r *Reconciler) createMachine(ctx context.Context, mp *clusterv1.MachinePool, im *unstructured.Unstructured, group, kind string) error {
	labels := map[string]string{}
	for k, v := range mp.Spec.Template.Labels {
		labels[k] = v
	}
	labels[clusterv1.ClusterNameLabel] = mp.Spec.ClusterName
	labels[clusterv1.MachinePoolNameLabel] = format.MustFormatValue(mp.Name)
	annotations := map[string]string{}
	for k, v := range mp.Spec.Template.Annotations {
		annotations[k] = v
	}
	tmpl := mp.Spec.Template.Spec
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Name: im.GetName(), Namespace: mp.Namespace, Labels: labels, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(mp, clusterv1.GroupVersion.WithKind("MachinePool"))},
		},
		Spec: clusterv1.MachineSpec{
			ClusterName: mp.Spec.ClusterName,
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: group, Kind: kind, Name: im.GetName()},
			// The API requires a bootstrap; an empty data secret name says "none of its own":
			// the instances boot from the pool's shared bootstrap data.
			Bootstrap:       clusterv1.Bootstrap{DataSecretName: ptr.To("")},
			Version:         tmpl.Version,
			MinReadySeconds: tmpl.MinReadySeconds,
			Deletion:        tmpl.Deletion,
			ReadinessGates:  tmpl.ReadinessGates,
		},
	}
	err := r.Client.Create(ctx, m)
	if apierrors.IsAlreadyExists(err) {
		existing := &clusterv1.Machine{}
		if gerr := r.Client.Get(ctx, client.ObjectKeyFromObject(m), existing); gerr != nil {
			return gerr
		}
		if existing.Spec.InfrastructureRef.Name == im.GetName() && existing.Spec.InfrastructureRef.Kind == kind {
			return nil
		}
		return fmt.Errorf("a Machine named %s exists and points at %s %s", m.Name,
			existing.Spec.InfrastructureRef.Kind, existing.Spec.InfrastructureRef.Name)
	}
	return err
}

// ensureControlled restores the pool's controller reference on one of its Machines when it
// was removed (a Machine controlled by something else is left alone).
func (r *Reconciler) ensureControlled(ctx context.Context, mp *clusterv1.MachinePool, m *clusterv1.Machine) error {
	if !m.DeletionTimestamp.IsZero() {
		return nil
	}
	if ref := metav1.GetControllerOf(m); ref != nil {
		return nil
	}
	if _, err := patch.Locked(ctx, r.Client, m, func() bool {
		var refs []metav1.OwnerReference
		for _, ref := range m.OwnerReferences {
			if ref.UID != mp.UID {
				refs = append(refs, ref)
			}
		}
		refs = append(refs, *metav1.NewControllerRef(mp, clusterv1.GroupVersion.WithKind("MachinePool")))
		m.OwnerReferences = refs
		return true
	}); err != nil {
		return fmt.Errorf("restoring the owner reference of Machine %s: %w", m.Name, err)
	}
	events.Eventf(r.Recorder, mp, corev1.EventTypeNormal, "OwnerReferenceRestored", "Machine %s is controlled by the MachinePool again", m.Name)
	return nil
}
