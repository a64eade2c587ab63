package machinesync

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/controllers/sync/internal/synccommon"
	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/patch"
	"github.com/machina-dev/machina/internal/userdata"
)

// toCAPI converts the Machine API copy onto the Cluster API side. When the Machine API is
// authoritative the Cluster API copies are paused; when the Cluster API is authoritative and
// has no copy yet (a Machine born Cluster API-authoritative), the copy is created unpaused and
// later syncs run the other way; during a handover from the Machine API the pause is left to
// the migration controller.
func (r *Reconciler) toCAPI(ctx context.Context, s *synccommon.Scope, mapi *machinev1beta1.Machine, capi *clusterv1.Machine, pause authority.Pause) (ctrl.Result, error) {
	set, err := r.capiSetOf(ctx, mapi)
	if err != nil {
		return ctrl.Result{}, err
	}
	if synccommon.NotMirror(set) {
		// Someone else's active Cluster API MachineSet has the name of this Machine's
		// MachineSet: it would adopt a copy of this Machine its selector matches, then count,
		// scale and delete it as its own. Nothing is mirrored until it is gone or paused.
		s.NotMirror(authority.ClusterAPIMachineSetNotMirrorReason, "MachineSet", set)
		return ctrl.Result{}, nil
	}
	// A paused copy (a mirror, or one mid-handover) hands the autoscaler's delete mark back.
	mirror := pause == authority.PauseMirror || pause == authority.KeepPause && capi != nil && gate.HasPausedAnnotation(capi)
	if mirror && capi != nil {
		carryMarkToMAPI(s, mapi, capi)
	}
	cc, err := authority.ContextFor(ctx, r.Client, r.Providers, r.Namespaces, authority.ProviderSpecKind(mapi.Spec.ProviderSpec))
	if err != nil {
		return ctrl.Result{RequeueAfter: ContextRetry}, s.Synchronized(authority.NoContextReason, nil, err, 0)
	}
	out, warnings, errs := convert.ToClusterAPIMachine(mapi, cc)
	if len(errs) > 0 {
		// Nothing is written on the other side: a partial mirror is worse than none.
		return ctrl.Result{}, s.Synchronized(authority.ConversionFailedReason, errs, nil, 0)
	}
	synccommon.DropCarried(mapi, out.Machine.Annotations, synccommon.ClusterAPIDeleteMarks)
	if mapi.Status.SynchronizedGeneration != mapi.Generation {
		for _, w := range warnings {
			r.event(mapi, corev1.EventTypeWarning, "ConversionWarning", "%s", w.String())
		}
	}
	if err := userdata.Ensure(ctx, r.Client, mapi.Namespace, out.Machine.Namespace, out.Machine.Spec.Bootstrap.DataSecretName, out.Machine.Spec.ClusterName); err != nil {
		return ctrl.Result{}, err
	}
	owner := capiOwner(set)

	// The Machine first, so the InfraMachine can be owned by it.
	desired := out.Machine
	synccommon.MarkMirrored(desired)
	authority.SetPaused(desired, pause.ForCreate())
	controllerutil.AddFinalizer(desired, authority.SyncFinalizer)
	if owner != nil {
		desired.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	created := false
	if capi == nil {
		if err := r.Client.Create(ctx, desired); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return ctrl.Result{RequeueAfter: patch.ConflictRetry}, nil
			}
			return ctrl.Result{}, errorf("creating Cluster API Machine: %w", err)
		}
		capi = desired
		created = true
		r.event(mapi, corev1.EventTypeNormal, "MirrorCreated", "Created Cluster API Machine %s/%s", capi.Namespace, capi.Name)
	} else if err := r.updateCAPI(ctx, capi, desired, pause); err != nil {
		return ctrl.Result{}, err
	}

	infra := out.InfraMachine
	authority.SetPaused(infra, pause.ForCreate())
	authority.MarkMirrorOf(infra, "Machine/"+mapi.Name)
	infra.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(capi, clusterv1.GroupVersion.WithKind("Machine"))})
	if err := r.upsertInfra(ctx, infra, pause); err != nil {
		if errors.Is(err, errLeftoverInfra) {
			// Nothing is adopted: once the garbage collector has removed it, it is created.
			return ctrl.Result{RequeueAfter: time.Second}, s.Synchronized(authority.MirrorWriteFailedReason, nil, err, 0)
		}
		return ctrl.Result{}, err
	}
	if pause == authority.PauseMirror {
		if done, err := r.carryRemediation(ctx, mapi, capi); done || err != nil {
			return ctrl.Result{}, err
		}
	}
	// Status flows to the Cluster API copy while it is paused (mid-handover, until the
	// migration controller unpauses it). A copy created in this pass gets it in the pass its
	// creation brings: by then the paused controller has usually added its Paused condition,
	// and the write, made from a copy that has it, keeps it (a write from the created copy
	// replaced the conditions list without it, and the controller wrote it again: one more
	// write per pair; locked, as the write now is, from the created copy it would conflict
	// and be retried instead).
	if !created && mirror {
		if err := r.statusToCAPI(ctx, mapi, capi); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, s.Synchronized(authority.SynchronizedReason, nil, nil, mapi.Generation)
}

// updateCAPI overwrites drift on the Cluster API Machine: its spec, the labels and
// annotations the conversion produces (removing those it copied before that are gone from the
// Machine API copy), the paused annotation and the sync finalizer.
func (r *Reconciler) updateCAPI(ctx context.Context, capi, desired *clusterv1.Machine, pause authority.Pause) error {
	base := capi.DeepCopy()
	capi.Spec = desired.Spec
	capi.Spec.ProviderID = cmp.Or(capi.Spec.ProviderID, base.Spec.ProviderID) // never cleared (synccommon.KeepProviderID)
	synccommon.MirrorMetadata(capi, desired.Labels, desired.Annotations)
	pause.Apply(capi)
	controllerutil.AddFinalizer(capi, authority.SyncFinalizer)
	if len(desired.OwnerReferences) > 0 && metav1.GetControllerOf(capi) == nil {
		capi.OwnerReferences = append(capi.OwnerReferences, desired.OwnerReferences...)
	}
	if equality.Semantic.DeepEqual(base.Spec, capi.Spec) && equality.Semantic.DeepEqual(base.ObjectMeta, capi.ObjectMeta) {
		return nil
	}
	return patch.Store(ctx, r.Client, capi, base)
}

// upsertInfra creates the InfraMachine or overwrites drift in its spec and labels, and keeps
// its paused annotation and the sync's mark (authority.MirrorOfAnnotation).
func (r *Reconciler) upsertInfra(ctx context.Context, desired client.Object, pause authority.Pause) error {
	existing := desired.DeepCopyObject().(client.Object)
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(desired), existing)
	if apierrors.IsNotFound(err) {
		return client.IgnoreAlreadyExists(r.Client.Create(ctx, desired))
	}
	if err != nil {
		return err
	}
	// A same-named InfraMachine another Cluster API Machine controls (that of a Machine deleted
	// a moment ago, not yet removed by the garbage collector) is not this Machine's: adopted,
	// the collector's deletion of it would stop a handover at the unpause, or have the provider
	// terminate this Machine's instance.
	if have, want := metav1.GetControllerOf(existing), metav1.GetControllerOf(desired); have != nil && want != nil &&
		have.Kind == want.Kind && have.UID != want.UID {
		return fmt.Errorf("%w: %s is controlled by %s %s with uid %s", errLeftoverInfra, existing.GetName(), have.Kind, have.Name, have.UID)
	}
	base := existing.DeepCopyObject().(client.Object)
	if err := synccommon.CopySpec(desired, existing); err != nil {
		return err
	}
	synccommon.KeepProviderID(existing, base)
	existing.SetLabels(authority.MergeMap(existing.GetLabels(), desired.GetLabels()))
	pause.Apply(existing)
	authority.MarkMirrorOf(existing, desired.GetAnnotations()[authority.MirrorOfAnnotation])
	if metav1.GetControllerOf(existing) == nil {
		existing.SetOwnerReferences(append(existing.GetOwnerReferences(), desired.GetOwnerReferences()...))
	}
	if equality.Semantic.DeepEqual(base, existing) {
		return nil
	}
	return patch.Store(ctx, r.Client, existing, base)
}

// errLeftoverInfra: the InfraMachine of the Machine's name belongs to an earlier Cluster API
// Machine of that name; the sync waits for the garbage collector to remove it.
var errLeftoverInfra = errors.New("waiting for the garbage collector to remove an InfraMachine of an earlier Cluster API Machine of this name")

// capiOwner is the controller reference a Cluster API copy gets: set, the Cluster API MachineSet
// of the same name as the Machine API Machine's MachineSet, when it exists (capiSetOf).
func capiOwner(set *clusterv1.MachineSet) *metav1.OwnerReference {
	if set == nil {
		return nil
	}
	return metav1.NewControllerRef(set, clusterv1.GroupVersion.WithKind("MachineSet"))
}

// capiSetOf reads the Cluster API MachineSet of the same name as the Machine API Machine's
// MachineSet; nil when the Machine has no MachineSet or that one has no Cluster API namesake.
// The namesake may be someone else's active MachineSet (synccommon.NotMirror), which the
// callers give no Machine.
func (r *Reconciler) capiSetOf(ctx context.Context, mapi *machinev1beta1.Machine) (*clusterv1.MachineSet, error) {
	ref := metav1.GetControllerOfNoCopy(mapi)
	if ref == nil || ref.Kind != "MachineSet" {
		return nil, nil
	}
	ms := &clusterv1.MachineSet{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespaces.ClusterAPI, Name: ref.Name}, ms); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return ms, nil
}
