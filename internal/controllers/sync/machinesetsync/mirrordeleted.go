package machinesetsync

import (
	"context"
	"slices"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/controllers/sync/internal/synccommon"
	"github.com/machina-dev/machina/internal/patch"
)

// mirrorDeleted undoes the deletion of a paused Cluster API mirror while the Machine API is
// authoritative: the mirror never acts on it. Its Machines and templates are first let go
// (their owner reference to it removed), so the garbage collector takes none of them along,
// then the mirror's finalizers — the sync's and the paused Cluster API controller's, which
// would never act — are removed so the deletion completes, and the next pass creates the
// mirror again; the Machine sync then gives the Machines their new owner.
func (r *Reconciler) mirrorDeleted(ctx context.Context, mapi *machinev1beta1.MachineSet, capi *clusterv1.MachineSet) (ctrl.Result, error) {
	if err := r.orphanDependents(ctx, capi); err != nil {
		return ctrl.Result{}, err
	}
	if err := synccommon.Release(ctx, r.Client, capi, clusterv1.MachineSetFinalizer); err != nil {
		return ctrl.Result{}, err
	}
	r.event(mapi, corev1.EventTypeWarning, "MirrorRecreated",
		"Cluster API MachineSet %s/%s was deleted but the Machine API is authoritative; it will be recreated", capi.Namespace, capi.Name)
	return ctrl.Result{RequeueAfter: time.Second}, nil
}

// orphanDependents removes owner references to capi from the Cluster API Machines and
// InfraMachineTemplates in its namespace.
func (r *Reconciler) orphanDependents(ctx context.Context, capi *clusterv1.MachineSet) error {
	var machines clusterv1.MachineList
	if err := r.Client.List(ctx, &machines, client.InNamespace(capi.Namespace)); err != nil {
		return err
	}
	objs := make([]client.Object, 0, len(machines.Items))
	for i := range machines.Items {
		objs = append(objs, &machines.Items[i])
	}
	for _, p := range r.Providers.All() {
		l := authority.MetadataList(p.InfraMachineTemplate)
		if err := r.Client.List(ctx, l, client.InNamespace(capi.Namespace)); err != nil {
			continue // the platform's CRDs are not installed
		}
		for i := range l.Items {
			l.Items[i].SetGroupVersionKind(p.InfraMachineTemplate)
			objs = append(objs, &l.Items[i])
		}
	}
	for _, o := range objs {
		_, err := patch.Locked(ctx, r.Client, o, func() bool {
			refs := o.GetOwnerReferences()
			kept := slices.DeleteFunc(slices.Clone(refs), func(ref metav1.OwnerReference) bool { return ref.UID == capi.UID })
			if len(kept) == len(refs) {
				return false
			}
			o.SetOwnerReferences(kept)
			return true
		})
		if client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}
