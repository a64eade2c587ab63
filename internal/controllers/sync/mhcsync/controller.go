// Package mhcsync mirrors MachineHealthChecks between the Machine API and the Cluster API.
// The Cluster API MachineHealthCheck is a superset: Cluster API-only features in use on an
// authoritative Cluster API copy are not carried to the Machine API copy, which mirrors the
// rest; a ConversionWarning event names each, as it does every other conversion warning.
// The openshift/api MachineHealthCheck has no authoritativeAPI fields, so authority is
// carried in annotations (see authority.MHCAuthoritativeAPIAnnotation).
package mhcsync

import (
	"context"
	"strconv"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/controllers/internal/pairwatch"
	"github.com/machina-dev/machina/internal/controllers/sync/internal/synccommon"
	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/patch"
)

// Reconciler keeps one MachineHealthCheck's copies in step.
type Reconciler struct {
	Client     client.Client
	Namespaces authority.Namespaces
	Recorder   record.EventRecorder
}

// +kubebuilder:rbac:groups=machine.openshift.io,resources=machinehealthchecks;machinehealthchecks/status,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinehealthchecks,verbs=get;list;watch;create;update;patch;delete

// SetupWithManager watches both copies.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	byName := pairwatch.ToMachineAPIKey(r.Namespaces.MachineAPI)
	inNS := pairwatch.InNamespace
	return ctrl.NewControllerManagedBy(mgr).
		Named("sync-machinehealthcheck").
		Watches(&machinev1beta1.MachineHealthCheck{}, pairwatch.EnqueueSelf(), inNS(r.Namespaces.MachineAPI)).
		Watches(&clusterv1.MachineHealthCheck{}, byName, inNS(r.Namespaces.ClusterAPI)).
		Complete(r)
}

// Authority returns a Machine API MachineHealthCheck's current authority ("" when undecided).
func Authority(m *machinev1beta1.MachineHealthCheck) machinev1beta1.MachineAuthority {
	return machinev1beta1.MachineAuthority(m.Annotations[authority.MHCStatusAuthoritativeAPIAnnotation])
}

// Reconcile applies the rule that fits the two copies.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return synccommon.RequeueOnConflict(r.reconcile(ctx, req))
}

func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	mapi, capi, err := synccommon.GetCopies(ctx, r.Client, req.NamespacedName, r.Namespaces.ClusterAPI, &machinev1beta1.MachineHealthCheck{}, &clusterv1.MachineHealthCheck{})
	if err != nil {
		return ctrl.Result{}, err
	}
	switch {
	case mapi == nil && capi == nil:
		return ctrl.Result{}, nil
	case mapi == nil:
		return ctrl.Result{}, r.capiOnly(ctx, capi)
	case !mapi.DeletionTimestamp.IsZero():
		if capi != nil {
			if Authority(mapi) != machinev1beta1.MachineAuthorityClusterAPI {
				if err := client.IgnoreNotFound(r.Client.Delete(ctx, capi)); err != nil {
					return ctrl.Result{}, err
				}
			}
			if err := synccommon.Release(ctx, r.Client, capi); err != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{}, synccommon.Release(ctx, r.Client, mapi)
	}
	if Authority(mapi) == "" || !controllerutil.ContainsFinalizer(mapi, authority.SyncFinalizer) {
		return ctrl.Result{}, r.initialise(ctx, mapi, capi)
	}
	if Authority(mapi) != machinev1beta1.MachineAuthorityMachineAPI && !gate.HasPausedAnnotation(mapi) {
		// A check the Cluster API owns (from before the annotation was written with the
		// authority) is paused for machine-api-operator's controller too. Only the migration
		// unpauses it, when it hands the check back: a user may pause a Machine API-owned
		// check themselves.
		base := mapi.DeepCopy()
		authority.SetMHCPaused(mapi, Authority(mapi))
		return ctrl.Result{}, patch.Store(ctx, r.Client, mapi, base)
	}
	// From here on the pass changes the Machine API copy in memory and writes it once, at
	// the end (synccommon.Scope). Its synchronised generation is an annotation
	// (recordGeneration), written with the rest.
	s := synccommon.NewScope(r.Client, r.Recorder, mapi, &mapi.Status.Conditions, nil)
	defer s.Finish(ctx, &res, &retErr)
	cc, err := authority.ClusterContext(ctx, r.Client, r.Namespaces)
	if err != nil {
		return ctrl.Result{RequeueAfter: 10 * time.Second}, s.Synchronized(authority.NoContextReason, nil, err, 0)
	}
	source, pause := authority.SyncSource(Authority(mapi), machinev1beta1.SynchronizedAPI(mapi.Annotations[authority.MHCSynchronizedAPIAnnotation]))
	if capi != nil && !capi.DeletionTimestamp.IsZero() && pause != authority.Unpause {
		// A paused mirror never acts on its deletion: it is let go and created again (mid-
		// handover too: the migration controller waits for the new copy).
		r.Recorder.Eventf(mapi, corev1.EventTypeWarning, "MirrorRecreated",
			"Cluster API MachineHealthCheck %s/%s was deleted but it is not authoritative; it will be recreated", capi.Namespace, capi.Name)
		return ctrl.Result{RequeueAfter: time.Second}, synccommon.Release(ctx, r.Client, capi)
	}
	if source == machinev1beta1.MachineAuthorityClusterAPI && capi != nil {
		if !capi.DeletionTimestamp.IsZero() {
			// The authoritative copy is going: so does this one, and its deletion lets both go.
			return ctrl.Result{}, client.IgnoreNotFound(r.Client.Delete(ctx, mapi))
		}
		// Paired: the sync finalizer on the authoritative copy carries its deletion here
		// (above) instead of the copy being created again from the Machine API one.
		if wrote, err := patch.EnsureFinalizer(ctx, r.Client, capi, authority.SyncFinalizer); wrote || err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.toMAPI(cc, s, mapi, capi)
	}
	return ctrl.Result{}, r.toCAPI(ctx, cc, s, mapi, capi, pause)
}

// capiOnly handles a Cluster API check without a Machine API copy. One the sync holds (its
// finalizer) is let go; a paused mirror among them, whose authoritative Machine API copy went
// without the sync (its finalizer removed by hand), is deleted first: nothing would ever
// act on it again.
func (r *Reconciler) capiOnly(ctx context.Context, capi *clusterv1.MachineHealthCheck) error {
	if !controllerutil.ContainsFinalizer(capi, authority.SyncFinalizer) {
		return nil
	}
	if gate.HasPausedAnnotation(capi) && capi.DeletionTimestamp.IsZero() {
		if err := client.IgnoreNotFound(r.Client.Delete(ctx, capi)); err != nil {
			return err
		}
		r.Recorder.Eventf(capi, corev1.EventTypeNormal, "MirrorDeleted", "Its authoritative Machine API MachineHealthCheck %s/%s is gone",
			r.Namespaces.MachineAPI, capi.Name)
	}
	return synccommon.Release(ctx, r.Client, capi)
}

// initialise decides the authority (the request annotation, or ClusterAPI when an active
// Cluster API copy exists, else MachineAPI) and adds the sync finalizer. A paused Cluster API
// copy is a mirror left over (its Machine API check deleted without the sync), not a check
// anyone runs: it does not make the new check the Cluster API's, and becomes its mirror.
func (r *Reconciler) initialise(ctx context.Context, mapi *machinev1beta1.MachineHealthCheck, capi *clusterv1.MachineHealthCheck) error {
	base := mapi.DeepCopy()
	if Authority(mapi) == "" {
		want := machinev1beta1.MachineAuthorityMachineAPI
		active := capi != nil && !gate.HasPausedAnnotation(capi)
		if mapi.Annotations[authority.MHCAuthoritativeAPIAnnotation] == string(machinev1beta1.MachineAuthorityClusterAPI) || active {
			want = machinev1beta1.MachineAuthorityClusterAPI
		}
		mapi.Annotations = authority.MergeMap(mapi.Annotations, map[string]string{authority.MHCStatusAuthoritativeAPIAnnotation: string(want)})
		if want != machinev1beta1.MachineAuthorityMachineAPI {
			authority.SetMHCPaused(mapi, want)
		}
	}
	controllerutil.AddFinalizer(mapi, authority.SyncFinalizer)
	return patch.Store(ctx, r.Client, mapi, base)
}

func (r *Reconciler) toCAPI(ctx context.Context, cc convert.Context, s *synccommon.Scope, mapi *machinev1beta1.MachineHealthCheck, capi *clusterv1.MachineHealthCheck, pause authority.Pause) error {
	out, warnings, errs := convert.ToClusterAPIMachineHealthCheck(mapi, cc)
	if len(errs) > 0 {
		return s.Synchronized(authority.ConversionFailedReason, errs, nil, 0)
	}
	r.warn(mapi, mapi.Generation, warnings)
	delete(out.Annotations, authority.MHCAuthoritativeAPIAnnotation)
	delete(out.Annotations, authority.MHCStatusAuthoritativeAPIAnnotation)
	delete(out.Annotations, authority.MHCSynchronizedAPIAnnotation)
	delete(out.Annotations, authority.MHCSynchronizedGenerationAnnotation)
	synccommon.MarkMirrored(out)
	authority.SetPaused(out, pause.ForCreate())
	controllerutil.AddFinalizer(out, authority.SyncFinalizer)
	if capi == nil {
		if err := r.Client.Create(ctx, out); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	} else {
		base := capi.DeepCopy()
		capi.Spec = out.Spec
		synccommon.MirrorMetadata(capi, out.Labels, out.Annotations)
		pause.Apply(capi)
		controllerutil.AddFinalizer(capi, authority.SyncFinalizer)
		if !equality.Semantic.DeepEqual(base.Spec, capi.Spec) || !equality.Semantic.DeepEqual(base.ObjectMeta, capi.ObjectMeta) {
			if err := patch.Store(ctx, r.Client, capi, base); err != nil {
				return err
			}
		}
	}
	recordGeneration(mapi, mapi.Generation)
	return s.Synchronized(authority.SynchronizedReason, nil, nil, 0)
}

func (r *Reconciler) toMAPI(cc convert.Context, s *synccommon.Scope, mapi *machinev1beta1.MachineHealthCheck, capi *clusterv1.MachineHealthCheck) error {
	// Cluster API-only features in use are not carried to the Machine API copy (seed 000):
	// it mirrors the rest, a warning names each one left out, and the migration refuses to
	// hand the check to the Machine API while they are in use.
	part, dropped := convert.WithoutClusterAPIOnly(capi)
	out, warnings, errs := convert.ToMachineAPIMachineHealthCheck(part, cc)
	if len(errs) > 0 {
		return s.Synchronized(authority.ConversionFailedReason, errs, nil, 0)
	}
	r.warn(mapi, capi.Generation, append(dropped, warnings...))
	mapi.Spec = out.Spec
	synccommon.MirrorMetadata(mapi, out.Labels, out.Annotations)
	recordGeneration(mapi, capi.Generation)
	return s.Synchronized(authority.SynchronizedReason, nil, nil, 0)
}

// warn records each conversion warning as a ConversionWarning event on the Machine API copy,
// once for each generation of the authoritative copy (not yet recorded as synchronised).
func (r *Reconciler) warn(mapi *machinev1beta1.MachineHealthCheck, generation int64, warnings convert.Warnings) {
	if mapi.Annotations[authority.MHCSynchronizedGenerationAnnotation] == strconv.FormatInt(generation, 10) {
		return
	}
	for _, w := range warnings {
		r.Recorder.Eventf(mapi, corev1.EventTypeWarning, "ConversionWarning", "%s", w.String())
	}
}

// recordGeneration notes on the Machine API copy (written at the end of the pass, with its
// spec) which generation of the authoritative copy
// the mirror now matches (authority.MHCSynchronizedGenerationAnnotation, the MachineHealthCheck's
// status.synchronizedGeneration): the migration controller hands authority over only when
// it equals the authoritative copy's current generation.
func recordGeneration(mapi *machinev1beta1.MachineHealthCheck, generation int64) {
	mapi.Annotations = authority.MergeMap(mapi.Annotations, map[string]string{authority.MHCSynchronizedGenerationAnnotation: strconv.FormatInt(generation, 10)})
}
