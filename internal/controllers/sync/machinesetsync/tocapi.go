package machinesetsync

import (
	"context"
	"maps"
	"slices"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/controllers/sync/internal/synccommon"
	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/patch"
	"github.com/machina-dev/machina/internal/provider"
	"github.com/machina-dev/machina/internal/userdata"
)

// toCAPI converts the Machine API MachineSet onto its Cluster API copy and template. When the
// Machine API is authoritative both are paused and the status flows back to them; when the
// Cluster API is authoritative but has no copy yet, the copy is created unpaused; during a
// handover from the Machine API the pause is left to the migration controller.
func (r *Reconciler) toCAPI(ctx context.Context, s *synccommon.Scope, mapi *machinev1beta1.MachineSet, capi *clusterv1.MachineSet, pause authority.Pause) (ctrl.Result, error) {
	// A paused copy (a mirror, or one mid-handover) takes its status from the Machine API and
	// hands the autoscaler's replicas back.
	mirror := pause == authority.PauseMirror || pause == authority.KeepPause && capi != nil && gate.HasPausedAnnotation(capi)
	if mirror && capi != nil {
		if wait, err := r.autoscalerReplicas(ctx, s, mapi, capi); wait || err != nil {
			// The mirror keeps the autoscaler's replicas until its delete marks are carried.
			return ctrl.Result{RequeueAfter: MarkRetry}, err
		}
	}
	p, err := authority.PlatformOf(r.Providers, authority.ProviderSpecKind(mapi.Spec.Template.Spec.ProviderSpec))
	var cc convert.Context
	if err == nil {
		cc, err = authority.PlatformContext(ctx, r.Client, p, r.Namespaces)
	}
	if err != nil {
		return ctrl.Result{RequeueAfter: ContextRetry}, s.Synchronized(authority.NoContextReason, nil, err, 0)
	}
	out, warnings, errs := convert.ToClusterAPIMachineSet(mapi, cc)
	if len(errs) > 0 {
		return ctrl.Result{}, s.Synchronized(authority.ConversionFailedReason, errs, nil, 0)
	}
	if mapi.Status.SynchronizedGeneration != mapi.Generation {
		for _, w := range warnings {
			r.event(mapi, corev1.EventTypeWarning, "ConversionWarning", "%s", w.String())
		}
	}

	desired := out.MachineSet
	synccommon.MarkMirrored(desired)
	authority.SetPaused(desired, pause.ForCreate())
	controllerutil.AddFinalizer(desired, authority.SyncFinalizer)
	// Machines the Cluster API MachineSet creates read their bootstrap data in its namespace.
	if err := userdata.Ensure(ctx, r.Client, mapi.Namespace, desired.Namespace, desired.Spec.Template.Spec.Bootstrap.DataSecretName, desired.Spec.ClusterName); err != nil {
		return ctrl.Result{}, err
	}
	// The template is written before the MachineSet naming it: a Cluster API MachineSet never
	// points at a template that is not there, even when a pass stops between the two writes
	// (once the Cluster API is authoritative its copy is the source, and its template with it).
	tmpl := out.InfraMachineTemplate
	if err := r.createTemplate(ctx, mapi, tmpl, capi, pause); err != nil {
		return ctrl.Result{}, writeFailed(s, err)
	}
	capi, err = r.writeMachineSet(ctx, mapi, capi, desired, pause)
	if err != nil {
		return ctrl.Result{}, writeFailed(s, err)
	}
	if capi == nil {
		return ctrl.Result{RequeueAfter: patch.ConflictRetry}, nil
	}
	if err := r.adoptTemplate(ctx, tmpl, p.InfraMachineTemplate, capi, pause); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.pruneTemplates(ctx, capi, p); err != nil {
		return ctrl.Result{}, err
	}
	if mirror {
		if err := r.statusToCAPI(ctx, mapi, capi); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, s.Synchronized(authority.SynchronizedReason, nil, nil, mapi.Generation)
}

// writeMachineSet creates the Cluster API MachineSet or brings it to desired; nil when
// another worker created it a moment ago (the next pass updates it).
func (r *Reconciler) writeMachineSet(ctx context.Context, mapi *machinev1beta1.MachineSet, capi, desired *clusterv1.MachineSet, pause authority.Pause) (*clusterv1.MachineSet, error) {
	if capi == nil {
		if err := r.Client.Create(ctx, desired); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return nil, nil
			}
			return nil, err
		}
		r.event(mapi, corev1.EventTypeNormal, "MirrorCreated", "Created Cluster API MachineSet %s/%s", desired.Namespace, desired.Name)
		return desired, nil
	}
	base := capi.DeepCopy()
	capi.Spec = desired.Spec
	synccommon.MirrorMetadata(capi, desired.Labels, desired.Annotations)
	pause.Apply(capi)
	controllerutil.AddFinalizer(capi, authority.SyncFinalizer)
	if equality.Semantic.DeepEqual(base.Spec, capi.Spec) && equality.Semantic.DeepEqual(base.ObjectMeta, capi.ObjectMeta) {
		return capi, nil
	}
	return capi, patch.Store(ctx, r.Client, capi, base)
}

// createTemplate creates the InfraMachineTemplate unless it exists, owned by the Cluster API
// MachineSet when that exists already (adoptTemplate gives a first template its owner).
func (r *Reconciler) createTemplate(ctx context.Context, mapi *machinev1beta1.MachineSet, tmpl client.Object, capi *clusterv1.MachineSet, pause authority.Pause) error {
	authority.SetPaused(tmpl, pause.ForCreate())
	authority.MarkMirrorOf(tmpl, "MachineSet/"+mapi.Name) // adoptTemplate reads it back from tmpl
	// Templates are named after their spec, so one that exists is the one wanted: read it from
	// the cache rather than send a create the API server refuses (each pass of a mirrored set
	// did, 0.5 refused creates per spec change in bench sync-latency).
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), tmpl.DeepCopyObject().(client.Object)); !apierrors.IsNotFound(err) {
		return err
	}
	if capi != nil {
		tmpl.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(capi, clusterv1.GroupVersion.WithKind("MachineSet"))})
	}
	kind := tmpl.GetObjectKind().GroupVersionKind().Kind // the client clears it from a typed object it writes
	err := r.Client.Create(ctx, tmpl)
	if err == nil {
		r.event(mapi, corev1.EventTypeNormal, "TemplateCreated", "Created %s %s/%s", kind, tmpl.GetNamespace(), tmpl.GetName())
	}
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// adoptTemplate keeps the template's paused annotation in line with authority, the sync's
// mark (authority.MirrorOfAnnotation) on it, and the Cluster API MachineSet as its
// controller when it has none: a template created before its MachineSet, or one let go when a
// deleted mirror was recreated (mirrorDeleted), is pruned and garbage-collected with it.
func (r *Reconciler) adoptTemplate(ctx context.Context, tmpl client.Object, gvk schema.GroupVersionKind, capi *clusterv1.MachineSet, pause authority.Pause) error {
	existing := authority.Metadata(gvk)
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), existing); err != nil {
		if !apierrors.IsNotFound(err) || tmpl.GetResourceVersion() == "" {
			return client.IgnoreNotFound(err)
		}
		// Created by this very pass (tmpl holds the API server's answer) and not in the cache
		// yet: adopt it from that answer. Once the Cluster API MachineSet exists and is the
		// source, later passes convert the other way (claimTemplate covers a pass stopped here).
		existing.ObjectMeta = metav1.ObjectMeta{Namespace: tmpl.GetNamespace(), Name: tmpl.GetName(), UID: tmpl.GetUID(),
			ResourceVersion: tmpl.GetResourceVersion(), Labels: maps.Clone(tmpl.GetLabels()),
			Annotations: maps.Clone(tmpl.GetAnnotations()), OwnerReferences: slices.Clone(tmpl.GetOwnerReferences())}
	}
	base := existing.DeepCopy()
	changed := pause.Apply(existing)
	changed = authority.MarkMirrorOf(existing, tmpl.GetAnnotations()[authority.MirrorOfAnnotation]) || changed
	if metav1.GetControllerOf(existing) == nil {
		existing.OwnerReferences = append(existing.OwnerReferences, *metav1.NewControllerRef(capi, clusterv1.GroupVersion.WithKind("MachineSet")))
		changed = true
	}
	if !changed {
		return nil
	}
	return patch.Store(ctx, r.Client, existing, base)
}

// writeFailed reports a refused write of the Cluster API copy or its template in
// Synchronized=False and returns err, so the pass is retried with backoff.
func writeFailed(s *synccommon.Scope, err error) error {
	if !apierrors.IsConflict(err) {
		_ = s.Synchronized(authority.MirrorWriteFailedReason, nil, err, 0) // a Machine API copy is there: never fails
	}
	return err
}

// pruneTemplates deletes templates this MachineSet owns that it no longer references and no
// InfraMachine was cloned from. Templates and InfraMachines are read as metadata of the
// platform's kinds.
func (r *Reconciler) pruneTemplates(ctx context.Context, capi *clusterv1.MachineSet, p provider.Provider) error {
	list := authority.MetadataList(p.InfraMachineTemplate)
	if err := r.Client.List(ctx, list, client.InNamespace(capi.Namespace)); err != nil {
		return err
	}
	var unused []*metav1.PartialObjectMetadata
	for i := range list.Items {
		t := &list.Items[i]
		ref := metav1.GetControllerOf(t)
		if ref != nil && ref.UID == capi.UID && t.Name != capi.Spec.Template.Spec.InfrastructureRef.Name && t.DeletionTimestamp.IsZero() {
			unused = append(unused, t)
		}
	}
	if len(unused) == 0 {
		return nil // the usual pass: no need to read the namespace's InfraMachines
	}
	// Read only: the cached InfraMachines are shared, not copied.
	machines := authority.MetadataList(p.InfraMachine)
	if err := r.Client.List(ctx, machines, client.InNamespace(capi.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	inUse := map[string]bool{}
	for _, m := range machines.Items {
		if n := m.Annotations[clusterv1.TemplateClonedFromNameAnnotation]; n != "" {
			inUse[n] = true
		}
	}
	for _, t := range unused {
		if inUse[t.Name] {
			continue
		}
		t.SetGroupVersionKind(p.InfraMachineTemplate)
		if err := client.IgnoreNotFound(r.Client.Delete(ctx, t)); err != nil {
			return err
		}
		r.event(capi, corev1.EventTypeNormal, "TemplateDeleted", "Deleted unused %s %s", p.InfraMachineTemplate.Kind, t.Name)
	}
	return nil
}

// statusToCAPI reflects the authoritative Machine API status on the paused Cluster API copy.
func (r *Reconciler) statusToCAPI(ctx context.Context, mapi *machinev1beta1.MachineSet, capi *clusterv1.MachineSet) error {
	base := capi.DeepCopy()
	capi.Status.Replicas = &mapi.Status.Replicas
	capi.Status.ReadyReplicas = &mapi.Status.ReadyReplicas
	capi.Status.AvailableReplicas = &mapi.Status.AvailableReplicas
	capi.Status.Selector = mapi.Status.LabelSelector
	if equality.Semantic.DeepEqual(base.Status, capi.Status) {
		return nil
	}
	return patch.StoreStatus(ctx, r.Client, capi, base) // the paused controller writes this status too
}

func (r *Reconciler) event(o client.Object, typ, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(o, typ, reason, format, args...)
	}
}
