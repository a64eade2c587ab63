// Package machinesync mirrors Machines between the Machine API and the Cluster API. The
// Machine API copy's status.authoritativeAPI says which side is the source: its spec is
// converted onto the other side (a Cluster API Machine plus its own InfraMachine), drift on
// the other side is overwritten, and status flows back. Deletions cross over through the
// sync finalizer, following the migration design's rules.
package machinesync

import (
	"context"
	"fmt"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/controllers/internal/ownedby"
	"github.com/machina-dev/machina/internal/controllers/internal/pairwatch"
	"github.com/machina-dev/machina/internal/controllers/sync/internal/synccommon"
	"github.com/machina-dev/machina/internal/provider"
)

// ContextRetry is how soon a sync that lacked its cluster context (Infrastructure, Cluster,
// InfraCluster) is tried again.
const ContextRetry = 10 * time.Second

// Reconciler keeps one Machine's two copies in step. Requests are keyed by the Machine API
// namespace and the shared name.
type Reconciler struct {
	Client client.Client
	// APIReader reads the owner of a deleted Machine (delete.go).
	APIReader  client.Reader
	Namespaces authority.Namespaces
	Recorder   record.EventRecorder
	// Providers are the platforms whose Machines are mirrored.
	Providers *provider.Registry
}

// +kubebuilder:rbac:groups=machine.openshift.io,resources=machines;machines/status,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;machines/status;machinesets;clusters,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=config.openshift.io,resources=infrastructures,verbs=get;list;watch
// +kubebuilder:rbac:groups=machine.openshift.io,resources=controlplanemachinesets,verbs=get
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch

// SetupWithManager watches both copies and every installed platform's InfraMachines.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	toKey := pairwatch.ToMachineAPIKey(r.Namespaces.MachineAPI)
	inNS := pairwatch.InNamespace
	if err := ownedby.Index(context.Background(), mgr.GetFieldIndexer(), &machinev1beta1.Machine{}); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("sync-machine").
		Watches(&machinev1beta1.Machine{}, pairwatch.EnqueueSelf(), inNS(r.Namespaces.MachineAPI)).
		Watches(&clusterv1.Machine{}, toKey, inNS(r.Namespaces.ClusterAPI)).
		// A Cluster API MachineSet appearing gives the copies of its Machines an owner, and
		// one becoming a paused mirror leaves their remediation to the sync. Its status
		// updates (every Machine's change moves its counts) bring nothing back.
		Watches(&clusterv1.MachineSet{}, handler.EnqueueRequestsFromMapFunc(r.machinesOfSet), inNS(r.Namespaces.ClusterAPI),
			builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{},
				predicate.LabelChangedPredicate{}))).
		// Each key is one Machine's pair of copies; different pairs sync independently.
		WithOptions(controller.Options{MaxConcurrentReconciles: 5})
	// Whole InfraMachines: a pass converts them whole (convertToMAPI, upsertInfra).
	b, err := synccommon.WatchInfraObjects(b, mgr.GetRESTMapper(), mgr.GetScheme(), r.Providers,
		func(p provider.Provider) schema.GroupVersionKind { return p.InfraMachine }, toKey, r.Namespaces.ClusterAPI)
	if err != nil {
		return err
	}
	return b.Complete(r)
}

// machinesOfSet maps a Cluster API MachineSet to the Machine API Machines of its namesake,
// found through the controller index (read only: the cached Machines are not copied). Without
// the namesake in the cache, every Machine naming a controller of that name is looked at.
func (r *Reconciler) machinesOfSet(ctx context.Context, o client.Object) []reconcile.Request {
	var list machinev1beta1.MachineList
	ms := &machinev1beta1.MachineSet{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespaces.MachineAPI, Name: o.GetName()}, ms)
	switch {
	case err == nil:
		err = ownedby.List(ctx, r.Client, &list, r.Namespaces.MachineAPI, ms.UID, client.UnsafeDisableDeepCopy)
	case apierrors.IsNotFound(err):
		err = r.Client.List(ctx, &list, client.InNamespace(r.Namespaces.MachineAPI), client.UnsafeDisableDeepCopy)
	}
	if err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if ref := metav1.GetControllerOfNoCopy(&list.Items[i]); ref != nil && ref.Kind == "MachineSet" && ref.Name == o.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

// Reconcile decides, from both copies, which rule applies.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return synccommon.RequeueOnConflict(r.reconcile(ctx, req))
}

func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	mapi, capi, err := synccommon.GetCopies(ctx, r.Client, types.NamespacedName{Namespace: r.Namespaces.MachineAPI, Name: req.Name},
		r.Namespaces.ClusterAPI, &machinev1beta1.Machine{}, &clusterv1.Machine{})
	if err != nil {
		return ctrl.Result{}, err
	}
	switch {
	case mapi == nil && capi == nil:
		return ctrl.Result{}, nil
	case mapi == nil:
		return r.capiOnly(ctx, capi)
	case mapi.Status.AuthoritativeAPI == "":
		// Also for a Machine deleted before its authority was decided: its MachineSet gave it
		// the Machine controller's finalizer, which only the sync takes off when the spec
		// gives the Machine to the Cluster API (mapiDeleted).
		return ctrl.Result{}, r.decideAuthority(ctx, mapi)
	case !mapi.DeletionTimestamp.IsZero():
		return r.mapiDeleted(ctx, mapi, capi)
	}
	// From here on the pass changes the Machine API copy in memory and writes it once, at
	// the end (synccommon.Scope).
	s := synccommon.NewScope(r.Client, r.Recorder, mapi, &mapi.Status.Conditions, &mapi.Status.SynchronizedGeneration)
	defer s.Finish(ctx, &res, &retErr)
	source, pause := authority.SyncSource(mapi.Status.AuthoritativeAPI, mapi.Status.SynchronizedAPI)
	if pause == authority.PauseMirror && synccommon.NotMirror(capi) {
		// Someone else's active Cluster API Machine of this name: left alone, and this Machine
		// is not mirrored (nor given the sync finalizer) until it is gone or paused.
		s.NotMirror(authority.ClusterAPIMachineNotMirrorReason, "Machine", capi)
		return ctrl.Result{}, nil
	}
	if err := s.EnsureFinalizer(ctx); err != nil {
		return ctrl.Result{}, err
	}
	if capi != nil && !capi.DeletionTimestamp.IsZero() {
		if pause == authority.KeepPause {
			return ctrl.Result{}, nil // the migration controller settles a deletion mid-handover
		}
		return r.capiDeleted(ctx, mapi, capi)
	}
	if source == machinev1beta1.MachineAuthorityClusterAPI && capi != nil {
		return r.toMAPI(ctx, s, mapi, capi)
	}
	// Machine API authoritative, or Cluster API authoritative without a Cluster API copy yet:
	// the Machine API spec is the source.
	return r.toCAPI(ctx, s, mapi, capi, pause)
}

// decideAuthority initialises an empty status.authoritativeAPI from the spec
// (synccommon.DecideAuthority).
func (r *Reconciler) decideAuthority(ctx context.Context, mapi *machinev1beta1.Machine) error {
	return synccommon.DecideAuthority(ctx, r.Client, mapi, mapi.Spec.AuthoritativeAPI, &mapi.Status.AuthoritativeAPI, &mapi.Status.SynchronizedAPI)
}

func (r *Reconciler) event(o client.Object, typ, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(o, typ, reason, format, args...)
	}
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
