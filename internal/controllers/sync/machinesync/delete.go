package machinesync

import (
	"context"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/controllers/sync/internal/synccommon"
	"github.com/machina-dev/machina/internal/patch"
)

// capiMachineFinalizer is the Cluster API Machine controller's finalizer.
const capiMachineFinalizer = clusterv1.MachineFinalizer

// deletionPoll is how often a carried-over deletion checks whether the authoritative
// controller has finished.
const deletionPoll = 2 * time.Second

// mapiDeleted carries a Machine API deletion over. It propagates when the Machine API was
// authoritative, when the Machine is owned (a MachineSet or health check deleted it), or when
// the Cluster API copy is going anyway; a standalone, non-authoritative Machine API copy may be
// deleted on its own, leaving the Cluster API Machine running. An active Cluster API Machine
// that is not the sync's mirror (synccommon.NotMirror) is never taken along.
func (r *Reconciler) mapiDeleted(ctx context.Context, mapi *machinev1beta1.Machine, capi *clusterv1.Machine) (ctrl.Result, error) {
	current := mapi.Status.AuthoritativeAPI
	if !controllerutil.ContainsFinalizer(mapi, authority.SyncFinalizer) {
		// Never mirrored. A Machine born with the Machine API finalizer whose spec gave it to
		// the Cluster API (decideAuthority) has no Machine API controller to let it go.
		if current == machinev1beta1.MachineAuthorityClusterAPI {
			_, err := patch.RemoveFinalizer(ctx, r.Client, mapi, machinev1beta1.MachineFinalizer)
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, nil
	}
	if current == machinev1beta1.MachineAuthorityMigrating {
		// The migration controller first settles which side carries the deletion out.
		return ctrl.Result{RequeueAfter: deletionPoll}, nil
	}
	if current != machinev1beta1.MachineAuthorityClusterAPI && synccommon.NotMirror(capi) {
		capi = nil // someone else's active Machine of this name: not this deletion's to carry
	}
	owned, err := r.ownerAlive(ctx, mapi)
	if err != nil {
		return ctrl.Result{}, err
	}
	propagate := current != machinev1beta1.MachineAuthorityClusterAPI || owned ||
		(capi != nil && !capi.DeletionTimestamp.IsZero())
	if capi != nil && propagate {
		if capi.DeletionTimestamp.IsZero() {
			if err := client.IgnoreNotFound(r.Client.Delete(ctx, capi)); err != nil {
				return ctrl.Result{}, err
			}
			r.event(mapi, corev1.EventTypeNormal, "MirrorDeleted", "Deleting Cluster API Machine %s/%s with its Machine API copy", capi.Namespace, capi.Name)
		}
		// Wait for the authoritative controller to finish with the instance.
		if current == machinev1beta1.MachineAuthorityClusterAPI {
			if controllerutil.ContainsFinalizer(capi, capiMachineFinalizer) {
				return ctrl.Result{RequeueAfter: deletionPoll}, nil
			}
		} else if controllerutil.ContainsFinalizer(mapi, machinev1beta1.MachineFinalizer) {
			return ctrl.Result{RequeueAfter: deletionPoll}, nil
		}
		if err := synccommon.Release(ctx, r.Client, capi, capiMachineFinalizer); err != nil {
			return ctrl.Result{}, err
		}
	} else if capi != nil {
		// The Cluster API Machine carries on alone.
		if err := synccommon.Release(ctx, r.Client, capi); err != nil {
			return ctrl.Result{}, err
		}
		r.event(mapi, corev1.EventTypeNormal, "DeletionNotSynchronised",
			"Cluster API Machine %s/%s is authoritative and keeps running", capi.Namespace, capi.Name)
	}
	// The Machine API controller's finalizer stays only while it is authoritative and working.
	extra := []string{}
	if current == machinev1beta1.MachineAuthorityClusterAPI {
		extra = append(extra, machinev1beta1.MachineFinalizer)
	}
	return ctrl.Result{}, synccommon.Release(ctx, r.Client, mapi, extra...)
}

// deletingOwners are the owners whose deletion of a Machine API Machine is carried over to the
// Cluster API copy: a MachineSet scaling down or remediating, and OpenShift's
// ControlPlaneMachineSet replacing a control-plane Machine (it stays a Machine API object when
// its Machines move; docs/migration.md). Without the latter a migrated master the
// ControlPlaneMachineSet replaced would keep its instance, and an etcd member, running.
var deletingOwners = map[schema.GroupKind]bool{
	{Group: machinev1beta1.GroupName, Kind: "MachineSet"}:             true,
	{Group: machinev1beta1.GroupName, Kind: "ControlPlaneMachineSet"}: true,
}

// ownerAlive reports whether the Machine's controller is one of deletingOwners and exists, not
// being deleted: such an owner deleting one of its Machines is carried over, while Machines
// going because their non-authoritative parent was deleted are not. The owner is read from
// the API server (this runs once per deletion), so no informer is kept for its kind; a kind
// not served on this cluster is an owner that does not exist.
func (r *Reconciler) ownerAlive(ctx context.Context, mapi *machinev1beta1.Machine) (bool, error) {
	ref := metav1.GetControllerOfNoCopy(mapi)
	if ref == nil {
		return false, nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || !deletingOwners[gv.WithKind(ref.Kind).GroupKind()] {
		return false, nil
	}
	owner := &metav1.PartialObjectMetadata{}
	owner.SetGroupVersionKind(gv.WithKind(ref.Kind))
	err = r.APIReader.Get(ctx, client.ObjectKey{Namespace: mapi.Namespace, Name: ref.Name}, owner)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return owner.UID == ref.UID && owner.DeletionTimestamp.IsZero(), nil
}

// capiDeleted carries a Cluster API deletion over while the Machine API copy still exists. It
// propagates when the Cluster API is authoritative or the Machine's MachineSet deleted it
// (scale down, remediation); otherwise — a copy deleted by hand, or taken along by the
// deletion of its non-authoritative MachineSet mirror — the deletion is undone: the copy is
// let go and recreated from the Machine API.
func (r *Reconciler) capiDeleted(ctx context.Context, mapi *machinev1beta1.Machine, capi *clusterv1.Machine) (ctrl.Result, error) {
	owned, err := r.capiOwnerAlive(ctx, capi)
	if err != nil {
		return ctrl.Result{}, err
	}
	if mapi.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityClusterAPI || owned {
		if err := client.IgnoreNotFound(r.Client.Delete(ctx, mapi)); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, nil // mapiDeleted finishes the job
	}
	r.event(mapi, corev1.EventTypeWarning, "MirrorRecreated",
		"Cluster API Machine %s/%s was deleted but the Machine API is authoritative; it will be recreated", capi.Namespace, capi.Name)
	if err := synccommon.Release(ctx, r.Client, capi, capiMachineFinalizer); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: time.Second}, nil
}

// capiOwnerAlive reports whether the Cluster API Machine's controlling MachineSet exists and is
// not being deleted.
func (r *Reconciler) capiOwnerAlive(ctx context.Context, capi *clusterv1.Machine) (bool, error) {
	ref := metav1.GetControllerOf(capi)
	if ref == nil || ref.Kind != "MachineSet" {
		return false, nil
	}
	ms := &clusterv1.MachineSet{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: capi.Namespace, Name: ref.Name}, ms)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return ms.UID == ref.UID && ms.DeletionTimestamp.IsZero(), nil
}
