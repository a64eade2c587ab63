package migration

import (
	"context"
	"fmt"
	"sort"
	"strings"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/controllers/internal/ownedby"
	"github.com/machina-dev/machina/internal/controllers/internal/pairwatch"
	"github.com/machina-dev/machina/internal/provider"
)

// MachineSetReconciler migrates MachineSets. The Machines of a MachineSet keep their own
// authority: a MachineSet's migration moves who scales it, and new Machines follow it.
type MachineSetReconciler struct {
	engine
	Namespaces authority.Namespaces
	providers  *provider.Registry
}

// NewMachineSetReconciler builds the MachineSet migration controller for the platforms in
// providers.
func NewMachineSetReconciler(c client.Client, ns authority.Namespaces, providers *provider.Registry, rec eventRecorder) *MachineSetReconciler {
	return &MachineSetReconciler{engine: engine{client: c, recorder: rec, pending: newPendingMetric("MachineSet")}, Namespaces: ns, providers: providers}
}

// +kubebuilder:rbac:groups=machine.openshift.io,resources=machinesets;machinesets/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinesets,verbs=get;list;watch;update;patch

// SetupWithManager watches both copies.
func (r *MachineSetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.live = mgr.GetAPIReader()
	for _, o := range []client.Object{&machinev1beta1.Machine{}, &clusterv1.Machine{}} {
		if err := ownedby.Index(context.Background(), mgr.GetFieldIndexer(), o); err != nil {
			return err
		}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("migration-machineset").
		Watches(&machinev1beta1.MachineSet{}, pairwatch.EnqueueSelf(), pairwatch.InNamespace(r.Namespaces.MachineAPI), whileOpen()).
		Watches(&clusterv1.MachineSet{}, pairwatch.ToMachineAPIKey(r.Namespaces.MachineAPI), pairwatch.InNamespace(r.Namespaces.ClusterAPI),
			whileNamesakeOpen(mgr.GetClient(), r.Namespaces.MachineAPI, func() client.Object { return &machinev1beta1.MachineSet{} })).
		Complete(r)
}

// Reconcile runs one step of a MachineSet's handover.
func (r *MachineSetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s := &machineSetSubject{mapi: &machinev1beta1.MachineSet{}}
	if err := r.client.Get(ctx, req.NamespacedName, s.mapi); err != nil || !s.mapi.DeletionTimestamp.IsZero() {
		// A resource being deleted has nothing left to hand over.
		r.pending.forget(req.NamespacedName)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	capi := &clusterv1.MachineSet{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: r.Namespaces.ClusterAPI, Name: req.Name}, capi); err == nil {
		s.capi = capi
		if err := r.getTemplate(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	} else if !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	if err := s.countMachines(ctx, r.client, r.Namespaces); err != nil {
		return ctrl.Result{}, err
	}
	return r.run(ctx, s)
}

// getTemplate reads the metadata of the Cluster API MachineSet's InfraMachineTemplate, of
// whichever platform provides its kind.
func (r *MachineSetReconciler) getTemplate(ctx context.Context, s *machineSetSubject) error {
	tmpl, _, err := authority.InfraMetadata(ctx, r.client, r.providers, s.capi.Namespace, s.capi.Spec.Template.Spec.InfrastructureRef,
		func(p provider.Provider) schema.GroupVersionKind { return p.InfraMachineTemplate })
	if tmpl != nil {
		s.tmpl = tmpl
	}
	return err
}

// countMachines counts each side's Machines of the MachineSet and how many of them have a
// copy on the other side: a MachineSet may change hands only when every Machine it owns is
// mirrored, or the new side would count too few and create more.
func (s *machineSetSubject) countMachines(ctx context.Context, c client.Client, ns authority.Namespaces) error {
	// Read only: the cached Machines are shared, not copied, and only the set's own are read.
	var mm machinev1beta1.MachineList
	if err := ownedby.List(ctx, c, &mm, ns.MachineAPI, s.mapi.UID, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	var cm clusterv1.MachineList
	if s.capi != nil {
		if err := ownedby.List(ctx, c, &cm, ns.ClusterAPI, s.capi.UID, client.UnsafeDisableDeepCopy); err != nil {
			return err
		}
	}
	mapiNames, capiNames := map[string]bool{}, map[string]bool{}
	for i := range mm.Items {
		if mm.Items[i].DeletionTimestamp.IsZero() {
			mapiNames[mm.Items[i].Name] = true
		}
	}
	for i := range cm.Items {
		if cm.Items[i].DeletionTimestamp.IsZero() {
			capiNames[cm.Items[i].Name] = true
		}
	}
	s.unmirrored = nil
	for n := range mapiNames {
		if !capiNames[n] {
			s.unmirrored = append(s.unmirrored, "machine.openshift.io/"+n)
		}
	}
	for n := range capiNames {
		if !mapiNames[n] {
			s.unmirrored = append(s.unmirrored, "cluster.x-k8s.io/"+n)
		}
	}
	return nil
}

type machineSetSubject struct {
	mapi *machinev1beta1.MachineSet
	capi *clusterv1.MachineSet
	tmpl *metav1.PartialObjectMetadata
	// unmirrored lists the MachineSet's Machines that have no copy owned by the other side's
	// MachineSet yet.
	unmirrored []string
}

func (s *machineSetSubject) mapiObject() client.Object { return s.mapi }
func (s *machineSetSubject) conditions() *[]machinev1beta1.Condition {
	return &s.mapi.Status.Conditions
}
func (s *machineSetSubject) hasCAPI() bool { return s.capi != nil }

func (s *machineSetSubject) authorities() (machinev1beta1.MachineAuthority, machinev1beta1.MachineAuthority, machinev1beta1.MachineAuthority) {
	return s.mapi.Spec.AuthoritativeAPI, s.mapi.Status.AuthoritativeAPI, machinev1beta1.MachineAuthority(s.mapi.Status.SynchronizedAPI)
}

func (s *machineSetSubject) synchronized() (bool, string) {
	if ok, why := synchronized(s.mapi.Status.Conditions, s.mapi.Status.SynchronizedGeneration, s.generation(oldSide(s))); !ok {
		return ok, why
	}
	if len(s.unmirrored) > 0 {
		sort.Strings(s.unmirrored)
		return false, fmt.Sprintf("%d Machine(s) not mirrored in both APIs yet: %s", len(s.unmirrored), strings.Join(first(s.unmirrored, 3), ", "))
	}
	return true, ""
}

func first(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(append([]string{}, s[:n]...), fmt.Sprintf("and %d more", len(s)-n))
}

func (s *machineSetSubject) generation(side machinev1beta1.MachineAuthority) int64 {
	if s.capi == nil {
		return sideGeneration(side, s.mapi, nil)
	}
	return sideGeneration(side, s.mapi, s.capi)
}

func (s *machineSetSubject) setAuthority(ctx context.Context, c client.Client, current, previous machinev1beta1.MachineAuthority, generation int64, cond *machinev1beta1.Condition) error {
	st := &s.mapi.Status
	return patchAuthority(ctx, c, s.mapi, authorityStatus{&st.AuthoritativeAPI, &st.SynchronizedAPI, &st.SynchronizedGeneration, &st.Conditions},
		current, previous, generation, cond)
}

func (s *machineSetSubject) pauseCAPI(ctx context.Context, c client.Client, paused bool) error {
	for _, o := range s.capiCopies() {
		if err := setPaused(ctx, c, o, paused, ""); err != nil {
			return err
		}
	}
	return nil
}

func (s *machineSetSubject) capiCopies() []client.Object { return []client.Object{s.capi, s.tmpl} }

func (s *machineSetSubject) paused(side machinev1beta1.MachineAuthority) (bool, string) {
	if side == machinev1beta1.MachineAuthorityMachineAPI || s.capi == nil {
		return sidePaused(side, s.mapi.Status.Conditions, nil, 0)
	}
	return sidePaused(side, s.mapi.Status.Conditions, s.capi.Status.Conditions, s.capi.Generation)
}

// moveFinalizers: the Machine API MachineSet has no controller finalizer; going back to it,
// the paused Cluster API MachineSet controller's finalizer is taken off so a later deletion
// is not held by a controller that no longer acts.
func (s *machineSetSubject) moveFinalizers(ctx context.Context, c client.Client, to machinev1beta1.MachineAuthority) (bool, error) {
	if to == machinev1beta1.MachineAuthorityMachineAPI && s.capi != nil {
		removed, err := removeFinalizers(ctx, c, s.capi, clusterv1.MachineSetFinalizer)
		return !removed, err
	}
	return true, nil
}
