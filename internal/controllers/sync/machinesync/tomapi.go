package machinesync

import (
	"context"
	"fmt"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// toMAPI converts the authoritative Cluster API Machine and its InfraMachine onto the Machine
// API copy, spec and status. The Cluster API Machine first gets the sync finalizer, as both
// copies of a pair do (a pair born in the Cluster API too), so its deletion reaches the sync
// and is carried over instead of the Machine being created again from its Machine API copy;
// and, if it has none, its controller (keepCAPI).
func (r *Reconciler) toMAPI(ctx context.Context, s *synccommon.Scope, mapi *machinev1beta1.Machine, capi *clusterv1.Machine) (ctrl.Result, error) {
	if wrote, err := r.keepCAPI(ctx, mapi, capi); wrote || err != nil {
		return ctrl.Result{}, err
	}
	if done, err := r.remediateForPausedOwner(ctx, mapi, capi); done || err != nil {
		return ctrl.Result{}, err
	}
	if err := r.carryMarkToCAPI(ctx, mapi, capi); err != nil {
		return ctrl.Result{}, err
	}
	desired, view, res, err := r.convertToMAPI(ctx, s, mapi, capi)
	if desired == nil {
		return res, err
	}
	synccommon.DropCarried(capi, desired.Annotations, synccommon.MachineAPIDeleteMarks)
	if view != nil {
		desired.Labels, desired.Annotations = view.Apply(desired.Labels, desired.Annotations)
	}
	requested, providerID := mapi.Spec.AuthoritativeAPI, mapi.Spec.ProviderID
	mapi.Spec = desired.Spec
	mapi.Spec.AuthoritativeAPI = requested // the user's request, never the sync's
	if mapi.Spec.ProviderID == nil {
		mapi.Spec.ProviderID = providerID // never cleared (synccommon.KeepProviderID)
	}
	synccommon.MirrorMetadata(mapi, desired.Labels, desired.Annotations)
	if owner, err := r.mapiOwner(ctx, capi); err != nil {
		return ctrl.Result{}, err
	} else if owner != nil && metav1.GetControllerOf(mapi) == nil {
		mapi.OwnerReferences = append(mapi.OwnerReferences, *owner)
	}
	statusToMAPI(mapi, capi)
	if view != nil {
		mapi.Status.ProviderStatus = view.ProviderStatus
	}
	return ctrl.Result{}, s.Synchronized(authority.SynchronizedReason, nil, nil, capi.Generation)
}

// convertToMAPI reads the InfraMachine and converts; on failure it records why and returns
// nil. The InstanceView is what the platform's actuator would record about the instance (nil
// when the platform records none).
func (r *Reconciler) convertToMAPI(ctx context.Context, s *synccommon.Scope, mapi *machinev1beta1.Machine, capi *clusterv1.Machine) (*machinev1beta1.Machine, *convert.InstanceView, ctrl.Result, error) {
	ref := capi.Spec.InfrastructureRef
	cc, err := authority.ContextFor(ctx, r.Client, r.Providers, r.Namespaces, ref.Kind)
	if err != nil {
		return nil, nil, ctrl.Result{RequeueAfter: ContextRetry}, s.Synchronized(authority.NoContextReason, nil, err, 0)
	}
	obj, err := r.Client.Scheme().New(cc.Platform.InfraMachineGVK()) // the manager's: every platform's types
	if err != nil {
		return nil, nil, ctrl.Result{}, err
	}
	infra := obj.(client.Object)
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: capi.Namespace, Name: ref.Name}, infra); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, ctrl.Result{RequeueAfter: ContextRetry}, s.Synchronized(authority.NoContextReason, nil,
				errorf("%s %s/%s not found", ref.Kind, capi.Namespace, ref.Name), 0)
		}
		return nil, nil, ctrl.Result{}, err
	}
	out, warnings, errs := convert.ToMachineAPIMachine(capi, infra, cc)
	if len(errs) > 0 {
		return nil, nil, ctrl.Result{}, s.Synchronized(authority.ConversionFailedReason, errs, nil, 0)
	}
	if mapi != nil && mapi.Status.SynchronizedGeneration != capi.Generation {
		for _, w := range warnings {
			r.event(mapi, corev1.EventTypeWarning, "ConversionWarning", "%s", w.String())
		}
	}
	if view, ok := convert.DescribeInstance(cc.Platform, infra, capi); ok {
		return out, &view, ctrl.Result{}, nil
	}
	return out, nil, ctrl.Result{}, nil
}

// keepCAPI stores on the authoritative Cluster API Machine, in one write, what the sync keeps
// there: its finalizer and, when the Machine has no controller, the Cluster API MachineSet
// that mirrors its Machine API copy's (adoptingSet). A Cluster API copy made before its
// MachineSet's mirror existed has no controller at first; the sync gives it one when the
// mirror appears, but only while the Machine API is authoritative (toCAPI). A Machine handed to
// the Cluster API before then stayed an orphan of the paused mirror, which adopts nothing, and
// its MachineSet's migration waited for it for ever ("not mirrored in both APIs yet").
//
// A paused copy paired for the first time is unpaused in that write, its InfraMachine first
// (synccommon.UnpauseAtPairing): the Cluster API owns the Machine and nothing else would.
// Each takes its controller's finalizer as it is unpaused, as in a handover.
func (r *Reconciler) keepCAPI(ctx context.Context, mapi *machinev1beta1.Machine, capi *clusterv1.Machine) (bool, error) {
	owner, err := r.adoptingSet(ctx, mapi, capi)
	if err != nil {
		return false, err
	}
	unpause := synccommon.UnpauseAtPairing(mapi.Status.AuthoritativeAPI, capi)
	if unpause {
		if err := synccommon.UnpauseInfra(ctx, r.Client, r.Providers, capi.Namespace, capi.Spec.InfrastructureRef,
			func(p provider.Provider) schema.GroupVersionKind { return p.InfraMachine },
			func(p provider.Provider) []string { return p.InfraMachineFinalizers }); err != nil {
			return false, fmt.Errorf("unpausing the InfraMachine of Cluster API Machine %s: %w", capi.Name, err)
		}
	}
	wrote, err := patch.Locked(ctx, r.Client, capi, func() bool {
		changed := controllerutil.AddFinalizer(capi, authority.SyncFinalizer)
		if unpause {
			authority.SetPaused(capi, false)
			controllerutil.AddFinalizer(capi, clusterv1.MachineFinalizer)
		}
		if owner != nil {
			capi.OwnerReferences = append(capi.OwnerReferences, *owner)
			changed = true
		}
		return changed
	})
	if err != nil {
		return false, fmt.Errorf("storing the sync finalizer and controller of Cluster API Machine %s: %w", capi.Name, err)
	}
	if wrote && unpause {
		r.event(mapi, corev1.EventTypeNormal, synccommon.UnpausedAtPairingReason,
			"Cluster API Machine %s/%s was paused; it is authoritative, so the sync unpaused it and its InfraMachine", capi.Namespace, capi.Name)
	}
	return wrote, nil
}

// adoptingSet is the controller a Cluster API Machine without one should have: the Cluster
// API MachineSet of the name of its Machine API copy's MachineSet, if it exists, is the sync's
// (not synccommon.NotMirror), is not being deleted, and selects the Machine (the Machines it
// would adopt itself, were it not a paused mirror; one that let the Machine go for its labels
// does not get it back).
func (r *Reconciler) adoptingSet(ctx context.Context, mapi *machinev1beta1.Machine, capi *clusterv1.Machine) (*metav1.OwnerReference, error) {
	if metav1.GetControllerOfNoCopy(capi) != nil {
		return nil, nil
	}
	ms, err := r.capiSetOf(ctx, mapi)
	if ms == nil || err != nil {
		return nil, err
	}
	sel, err := metav1.LabelSelectorAsSelector(&ms.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(capi.Labels)) || !ms.DeletionTimestamp.IsZero() ||
		ms.Spec.ClusterName != capi.Spec.ClusterName || synccommon.NotMirror(ms) {
		return nil, nil
	}
	return metav1.NewControllerRef(ms, clusterv1.GroupVersion.WithKind("MachineSet")), nil
}

// mapiOwner is the Machine API MachineSet mirroring the Cluster API Machine's MachineSet.
func (r *Reconciler) mapiOwner(ctx context.Context, capi *clusterv1.Machine) (*metav1.OwnerReference, error) {
	ref := metav1.GetControllerOf(capi)
	if ref == nil || ref.Kind != "MachineSet" {
		return nil, nil
	}
	ms := &machinev1beta1.MachineSet{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespaces.MachineAPI, Name: ref.Name}, ms)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return metav1.NewControllerRef(ms, machinev1beta1.GroupVersion.WithKind("MachineSet")), nil
}

// capiOnly handles a Cluster API Machine without a Machine API copy: it lives on its own,
// unless its MachineSet is mirrored in the Machine API, which then shows it as a Cluster
// API-authoritative Machine. A paused mirror (sync finalizer and paused annotation) whose
// authoritative Machine API copy is gone without carrying its deletion over (someone removed
// the sync finalizer there, or the deletion raced the mirror's creation) goes too: the paused
// Cluster API controller will never act on it, so the sync deletes it and lets go of its
// finalizer and the Cluster API controller's.
func (r *Reconciler) capiOnly(ctx context.Context, capi *clusterv1.Machine) (ctrl.Result, error) {
	if _, paused := capi.Annotations[clusterv1.PausedAnnotation]; paused && controllerutil.ContainsFinalizer(capi, authority.SyncFinalizer) {
		if capi.DeletionTimestamp.IsZero() {
			if err := client.IgnoreNotFound(r.Client.Delete(ctx, capi)); err != nil {
				return ctrl.Result{}, err
			}
			r.event(capi, corev1.EventTypeNormal, "MirrorDeleted", "Its authoritative Machine API Machine %s/%s is gone", r.Namespaces.MachineAPI, capi.Name)
		}
		return ctrl.Result{}, synccommon.Release(ctx, r.Client, capi, capiMachineFinalizer)
	}
	if controllerutil.ContainsFinalizer(capi, authority.SyncFinalizer) {
		// Its copy was deleted and the deletion was settled then; nothing left to sync.
		_, err := patch.RemoveFinalizer(ctx, r.Client, capi, authority.SyncFinalizer)
		return ctrl.Result{}, err
	}
	if !capi.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	owner, err := r.mapiOwner(ctx, capi)
	if err != nil || owner == nil {
		return ctrl.Result{}, err
	}
	// No copy to record a failure on (synccommon.Scope); the instance view comes with the
	// first toMAPI pass.
	out, _, res, err := r.convertToMAPI(ctx, synccommon.NewScope(r.Client, r.Recorder, nil, nil, nil), nil, capi)
	if out == nil {
		return res, err
	}
	out.Namespace = r.Namespaces.MachineAPI
	out.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
	out.OwnerReferences = []metav1.OwnerReference{*owner}
	synccommon.MarkMirrored(out)
	controllerutil.AddFinalizer(out, authority.SyncFinalizer)
	if err := r.Client.Create(ctx, out); err != nil {
		return ctrl.Result{}, client.IgnoreAlreadyExists(err)
	}
	// Locked: a Machine API controller (machina's or machine-api-operator's) may have decided
	// the empty authority since the create, from the spec, which says ClusterAPI; that
	// decision then stands.
	_, err = patch.LockedStatus(ctx, r.Client, out, func() bool {
		out.Status.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
		out.Status.SynchronizedAPI = machinev1beta1.ClusterAPISynchronized
		return true
	})
	return ctrl.Result{}, err
}
