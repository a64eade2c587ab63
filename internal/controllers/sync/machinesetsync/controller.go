// Package machinesetsync mirrors MachineSets between the Machine API and the Cluster API. A
// Machine API MachineSet maps to a Cluster API MachineSet of the same name plus an
// InfraMachineTemplate named <name>-<hash of its spec>: a changed providerSpec creates a new
// template and repoints the MachineSet, and templates no longer used are deleted. The Machine
// API copy's status.authoritativeAPI decides which way the spec flows; status flows back.
package machinesetsync

import (
	"context"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/controllers/internal/pairwatch"
	"github.com/machina-dev/machina/internal/controllers/sync/internal/synccommon"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/provider"
)

// ContextRetry is how soon a sync that lacked its cluster context is tried again.
const ContextRetry = 10 * time.Second

// Reconciler keeps one MachineSet's copies in step; requests carry the Machine API namespace.
type Reconciler struct {
	Client client.Client
	// APIReader reads the Machines a scale-down by the autoscaler waits on (marks.go).
	APIReader  client.Reader
	Namespaces authority.Namespaces
	Recorder   record.EventRecorder
	// Providers are the platforms whose MachineSets are mirrored.
	Providers *provider.Registry
	// AutoscalerFieldManager is the cluster autoscaler's field manager, whose replicas
	// changes on a paused Cluster API mirror are carried over (manager.Env.AutoscalerManager).
	AutoscalerFieldManager string
}

// +kubebuilder:rbac:groups=machine.openshift.io,resources=machinesets;machinesets/status,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinesets;machinesets/status,verbs=get;list;watch;create;update;patch;delete

// SetupWithManager watches both copies and the templates a Cluster API MachineSet owns, of
// every platform whose CRDs are installed.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	key := func(name string) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: r.Namespaces.MachineAPI, Name: name}}}
	}
	byName := pairwatch.ToMachineAPIKey(r.Namespaces.MachineAPI)
	// A template is the concern of the MachineSet that owns it or, before it has an owner
	// (written before its MachineSet, which adopts it once the cache holds it), of the one
	// its mirror mark names: its arrival in the cache must bring that MachineSet a pass, or a
	// pass that ran before the cache had it would leave it unadopted for good.
	byOwner := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		for _, ref := range o.GetOwnerReferences() {
			if ref.Kind == "MachineSet" {
				return key(ref.Name)
			}
		}
		if name, ok := strings.CutPrefix(o.GetAnnotations()[authority.MirrorOfAnnotation], "MachineSet/"); ok && name != "" {
			return key(name)
		}
		return nil
	})
	inNS := pairwatch.InNamespace
	b := ctrl.NewControllerManagedBy(mgr).
		Named("sync-machineset").
		Watches(&machinev1beta1.MachineSet{}, pairwatch.EnqueueSelf(), inNS(r.Namespaces.MachineAPI)).
		Watches(&clusterv1.MachineSet{}, byName, inNS(r.Namespaces.ClusterAPI))
	b, err := synccommon.WatchInfra(b, mgr.GetRESTMapper(), r.Providers,
		func(p provider.Provider) schema.GroupVersionKind { return p.InfraMachineTemplate }, byOwner, r.Namespaces.ClusterAPI)
	if err != nil {
		return err
	}
	return b.Complete(r)
}

// Reconcile applies the rule that fits the two copies.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return synccommon.RequeueOnConflict(r.reconcile(ctx, req))
}

func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	mapi, capi, err := synccommon.GetCopies(ctx, r.Client, req.NamespacedName, r.Namespaces.ClusterAPI, &machinev1beta1.MachineSet{}, &clusterv1.MachineSet{})
	if err != nil {
		return ctrl.Result{}, err
	}
	if capi != nil && ownedByDeployment(capi) {
		// A MachineDeployment's MachineSet has no Machine API counterpart: never mirrored.
		return ctrl.Result{}, nil
	}
	switch {
	case mapi == nil && capi == nil:
		return ctrl.Result{}, nil
	case mapi == nil:
		return ctrl.Result{}, r.capiOnly(ctx, capi)
	case !mapi.DeletionTimestamp.IsZero():
		return ctrl.Result{}, r.mapiDeleted(ctx, mapi, capi)
	}
	if mapi.Status.AuthoritativeAPI == "" {
		return ctrl.Result{}, r.decideAuthority(ctx, mapi)
	}
	// From here on the pass changes the Machine API copy in memory and writes it once, at
	// the end (synccommon.Scope).
	s := synccommon.NewScope(r.Client, r.Recorder, mapi, &mapi.Status.Conditions, &mapi.Status.SynchronizedGeneration)
	defer s.Finish(ctx, &res, &retErr)
	source, pause := authority.SyncSource(mapi.Status.AuthoritativeAPI, mapi.Status.SynchronizedAPI)
	if pause == authority.PauseMirror && synccommon.NotMirror(capi) {
		// Someone else's active Cluster API MachineSet of this name: left alone (its Machines
		// and templates too), and this MachineSet is not mirrored until it is gone or paused.
		s.NotMirror(authority.ClusterAPIMachineSetNotMirrorReason, "MachineSet", capi)
		return ctrl.Result{}, nil
	}
	if err := s.EnsureFinalizer(ctx); err != nil {
		return ctrl.Result{}, err
	}
	if capi != nil && !capi.DeletionTimestamp.IsZero() {
		switch pause {
		case authority.KeepPause:
			return ctrl.Result{}, nil // the migration controller settles a deletion mid-handover
		case authority.PauseMirror:
			return r.mirrorDeleted(ctx, mapi, capi)
		}
	}
	if source == machinev1beta1.MachineAuthorityClusterAPI && capi != nil {
		if !capi.DeletionTimestamp.IsZero() {
			// The authoritative copy is going: so does this one.
			return ctrl.Result{}, client.IgnoreNotFound(r.Client.Delete(ctx, mapi))
		}
		return r.toMAPI(ctx, s, mapi, capi)
	}
	return r.toCAPI(ctx, s, mapi, capi, pause)
}

// capiOnly handles a Cluster API MachineSet whose Machine API copy is gone. An authoritative
// one carries on alone, let go by the sync. A paused mirror the sync holds (its finalizer),
// whose authoritative Machine API copy went without the sync (the finalizer removed by
// hand), would never act again: it is deleted, its Machines and templates orphaned rather
// than taken along (each Machine is its own pair's concern), and let go with the core's
// finalizer, which a paused controller never removes.
func (r *Reconciler) capiOnly(ctx context.Context, capi *clusterv1.MachineSet) error {
	if gate.HasPausedAnnotation(capi) && controllerutil.ContainsFinalizer(capi, authority.SyncFinalizer) && capi.DeletionTimestamp.IsZero() {
		if err := client.IgnoreNotFound(r.Client.Delete(ctx, capi, client.PropagationPolicy(metav1.DeletePropagationOrphan))); err != nil {
			return err
		}
		r.event(capi, corev1.EventTypeNormal, "MirrorDeleted", "Its authoritative Machine API MachineSet %s/%s is gone",
			r.Namespaces.MachineAPI, capi.Name)
	}
	return synccommon.Release(ctx, r.Client, capi, pausedCoreFinalizer(capi)...)
}

// decideAuthority initialises an empty status.authoritativeAPI from the spec
// (synccommon.DecideAuthority).
func (r *Reconciler) decideAuthority(ctx context.Context, mapi *machinev1beta1.MachineSet) error {
	return synccommon.DecideAuthority(ctx, r.Client, mapi, mapi.Spec.AuthoritativeAPI, &mapi.Status.AuthoritativeAPI, &mapi.Status.SynchronizedAPI)
}

// mapiDeleted: an authoritative Machine API MachineSet takes its Cluster API copy along; a
// non-authoritative one goes alone and the Cluster API MachineSet keeps running, and so do the
// Machines the Machine API still runs (keepMachines). An active Cluster API MachineSet that is
// not the sync's mirror (synccommon.NotMirror) is never taken along.
func (r *Reconciler) mapiDeleted(ctx context.Context, mapi *machinev1beta1.MachineSet, capi *clusterv1.MachineSet) error {
	if mapi.Status.AuthoritativeAPI != machinev1beta1.MachineAuthorityClusterAPI && synccommon.NotMirror(capi) {
		capi = nil // someone else's active MachineSet of this name: not this deletion's to carry
	}
	if mapi.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityClusterAPI {
		if err := r.keepMachines(ctx, mapi, capi); err != nil {
			return err
		}
	}
	if capi != nil {
		if mapi.Status.AuthoritativeAPI != machinev1beta1.MachineAuthorityClusterAPI && capi.DeletionTimestamp.IsZero() {
			// In the foreground: the mirror stays until its Machines are gone. The upstream
			// Cluster API core cannot delete a Machine whose MachineSet is missing (it looks the
			// owner up first and stops there), so a Cluster API-authoritative Machine of the set
			// would stay, instance and all, for ever.
			if err := client.IgnoreNotFound(r.Client.Delete(ctx, capi, client.PropagationPolicy(metav1.DeletePropagationForeground))); err != nil {
				return err
			}
		}
		if err := synccommon.Release(ctx, r.Client, capi, pausedCoreFinalizer(capi)...); err != nil {
			return err
		}
	}
	return synccommon.Release(ctx, r.Client, mapi)
}

// pausedCoreFinalizer is the Cluster API MachineSet controller's finalizer when capi is
// paused: the upstream core adds it to paused MachineSets too, and never acts on them, so a
// paused mirror that is deleted would keep it for ever.
func pausedCoreFinalizer(capi *clusterv1.MachineSet) []string {
	if !gate.HasPausedAnnotation(capi) {
		return nil
	}
	return []string{clusterv1.MachineSetFinalizer}
}

// ownedByDeployment reports a Cluster API MachineSet controlled by a MachineDeployment.
func ownedByDeployment(ms *clusterv1.MachineSet) bool {
	ref := metav1.GetControllerOf(ms)
	return ref != nil && ref.Kind == "MachineDeployment" && ref.APIVersion == clusterv1.GroupVersion.String()
}
