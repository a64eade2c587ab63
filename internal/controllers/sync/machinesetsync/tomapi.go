package machinesetsync

import (
	"context"
	"fmt"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/controllers/sync/internal/synccommon"
	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/patch"
	"github.com/machina-dev/machina/internal/provider"
)

// toMAPI converts the authoritative Cluster API MachineSet and its template onto the Machine
// API copy, keeping the user's authority requests, and reflects the Cluster API status; a
// replicas change the autoscaler made on the copy goes to the Cluster API first. The
// Cluster API MachineSet first gets the sync finalizer, as both copies of a pair do (one born
// in the Cluster API too), so its deletion is carried over instead of it being created again
// from its Machine API copy (keepCAPI).
func (r *Reconciler) toMAPI(ctx context.Context, s *synccommon.Scope, mapi *machinev1beta1.MachineSet, capi *clusterv1.MachineSet) (ctrl.Result, error) {
	if wrote, err := r.keepCAPI(ctx, mapi, capi); wrote || err != nil {
		return ctrl.Result{}, err
	}
	if wait, err := r.autoscalerReplicasToCAPI(ctx, mapi, capi); wait || err != nil {
		// The mirror keeps the autoscaler's replicas until its delete marks are carried.
		return ctrl.Result{RequeueAfter: MarkRetry}, err
	}
	ref := capi.Spec.Template.Spec.InfrastructureRef
	cc, err := authority.ContextFor(ctx, r.Client, r.Providers, r.Namespaces, ref.Kind)
	if err != nil {
		return ctrl.Result{RequeueAfter: ContextRetry}, s.Synchronized(authority.NoContextReason, nil, err, 0)
	}
	obj, err := r.Client.Scheme().New(cc.Platform.InfraMachineTemplateGVK()) // the manager's: every platform's types
	if err != nil {
		return ctrl.Result{}, err
	}
	tmpl := obj.(client.Object)
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: capi.Namespace, Name: ref.Name}, tmpl); err != nil {
		if apierrors.IsNotFound(err) {
			missing := fmt.Errorf("spec.template.spec.infrastructureRef: %s %s/%s not found", ref.Kind, capi.Namespace, ref.Name)
			return ctrl.Result{RequeueAfter: ContextRetry}, s.Synchronized(authority.TemplateNotFoundReason, nil, missing, 0)
		}
		return ctrl.Result{}, err
	}
	if err := r.claimTemplate(ctx, mapi, capi, cc.Platform.InfraMachineTemplateGVK()); err != nil {
		return ctrl.Result{}, err
	}
	out, warnings, errs := convert.ToMachineAPIMachineSet(capi, tmpl, cc)
	if len(errs) > 0 {
		return ctrl.Result{}, s.Synchronized(authority.ConversionFailedReason, errs, nil, 0)
	}
	if mapi.Status.SynchronizedGeneration != capi.Generation {
		for _, w := range warnings {
			r.event(mapi, corev1.EventTypeWarning, "ConversionWarning", "%s", w.String())
		}
	}
	requested, templateAuthority := mapi.Spec.AuthoritativeAPI, mapi.Spec.Template.Spec.AuthoritativeAPI
	mapi.Spec = out.Spec
	mapi.Spec.AuthoritativeAPI, mapi.Spec.Template.Spec.AuthoritativeAPI = requested, templateAuthority
	synccommon.MirrorMetadata(mapi, out.Labels, out.Annotations)
	// The spec first: the status records the generation this write gives.
	if err := s.StoreSpec(ctx); err != nil {
		return ctrl.Result{}, err
	}
	mapi.Status.Replicas = ptr.Deref(capi.Status.Replicas, 0)
	mapi.Status.ReadyReplicas = ptr.Deref(capi.Status.ReadyReplicas, 0)
	mapi.Status.AvailableReplicas = ptr.Deref(capi.Status.AvailableReplicas, 0)
	mapi.Status.LabelSelector = capi.Status.Selector
	mapi.Status.ObservedGeneration = mapi.Generation
	return ctrl.Result{}, s.Synchronized(authority.SynchronizedReason, nil, nil, capi.Generation)
}

// keepCAPI gives the authoritative Cluster API MachineSet the sync finalizer. One paired for
// the first time while paused is unpaused in that write, its InfraMachineTemplate first
// (synccommon.UnpauseAtPairing): the Cluster API owns the MachineSet and nothing else would
// unpause it, so it would never scale.
func (r *Reconciler) keepCAPI(ctx context.Context, mapi *machinev1beta1.MachineSet, capi *clusterv1.MachineSet) (bool, error) {
	unpause := synccommon.UnpauseAtPairing(mapi.Status.AuthoritativeAPI, capi)
	if unpause {
		if err := synccommon.UnpauseInfra(ctx, r.Client, r.Providers, capi.Namespace, capi.Spec.Template.Spec.InfrastructureRef,
			func(p provider.Provider) schema.GroupVersionKind { return p.InfraMachineTemplate },
			func(provider.Provider) []string { return nil }); err != nil {
			return false, fmt.Errorf("unpausing the InfraMachineTemplate of Cluster API MachineSet %s: %w", capi.Name, err)
		}
	}
	wrote, err := patch.Locked(ctx, r.Client, capi, func() bool {
		changed := controllerutil.AddFinalizer(capi, authority.SyncFinalizer)
		if unpause {
			authority.SetPaused(capi, false)
		}
		return changed
	})
	if err != nil {
		return false, fmt.Errorf("storing the sync finalizer of Cluster API MachineSet %s: %w", capi.Name, err)
	}
	if wrote && unpause {
		r.event(mapi, corev1.EventTypeNormal, synccommon.UnpausedAtPairingReason,
			"Cluster API MachineSet %s/%s was paused; it is authoritative, so the sync unpaused it and its InfraMachineTemplate", capi.Namespace, capi.Name)
	}
	return wrote, nil
}

// claimTemplate gives the Cluster API MachineSet, now the source, the template the sync
// wrote for it before the MachineSet existed (toCAPI writes the template first) when the pass
// that created both stopped before adoptTemplate: without a controller the template would
// outlive the MachineSet. Only a template marked as this set's mirror and controlled by
// nobody is claimed; a user's template is never touched. The template is read from the
// metadata cache the controller watches it through, so the pass an event brings sees what
// the event saw.
func (r *Reconciler) claimTemplate(ctx context.Context, mapi *machinev1beta1.MachineSet, capi *clusterv1.MachineSet, gvk schema.GroupVersionKind) error {
	tmpl := authority.Metadata(gvk)
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: capi.Namespace, Name: capi.Spec.Template.Spec.InfrastructureRef.Name}, tmpl); err != nil {
		return client.IgnoreNotFound(err)
	}
	if metav1.GetControllerOf(tmpl) != nil || tmpl.Annotations[authority.MirrorOfAnnotation] != "MachineSet/"+mapi.Name ||
		!tmpl.DeletionTimestamp.IsZero() {
		return nil
	}
	base := tmpl.DeepCopy()
	tmpl.OwnerReferences = append(tmpl.OwnerReferences, *metav1.NewControllerRef(capi, clusterv1.GroupVersion.WithKind("MachineSet")))
	if err := patch.Store(ctx, r.Client, tmpl, base); err != nil {
		return fmt.Errorf("making Cluster API MachineSet %s the controller of %s %s: %w", capi.Name, gvk.Kind, tmpl.Name, err)
	}
	return nil
}
