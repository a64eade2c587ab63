package migration

import (
	"context"
	"fmt"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/controllers/internal/pairwatch"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/patch"
	"github.com/machina-dev/machina/internal/provider"
)

// MachineReconciler migrates Machines.
type MachineReconciler struct {
	engine
	Namespaces authority.Namespaces
	providers  *provider.Registry
}

// NewMachineReconciler builds the Machine migration controller for the platforms in providers.
func NewMachineReconciler(c client.Client, ns authority.Namespaces, providers *provider.Registry, rec eventRecorder) *MachineReconciler {
	return &MachineReconciler{engine: engine{client: c, recorder: rec, pending: newPendingMetric("Machine")}, Namespaces: ns, providers: providers}
}

// +kubebuilder:rbac:groups=machine.openshift.io,resources=machines;machines/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch;update;patch

// SetupWithManager watches both copies (the Cluster API Machine's Paused condition moves the
// handover on).
func (r *MachineReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.live = mgr.GetAPIReader()
	return ctrl.NewControllerManagedBy(mgr).
		Named("migration-machine").
		Watches(&machinev1beta1.Machine{}, pairwatch.EnqueueSelf(), pairwatch.InNamespace(r.Namespaces.MachineAPI), whileOpen()).
		Watches(&clusterv1.Machine{}, pairwatch.ToMachineAPIKey(r.Namespaces.MachineAPI), pairwatch.InNamespace(r.Namespaces.ClusterAPI),
			whileNamesakeOpen(mgr.GetClient(), r.Namespaces.MachineAPI, func() client.Object { return &machinev1beta1.Machine{} })).
		// Handovers of different Machines are independent; each waits on other controllers
		// between its steps, so several at once keep a bulk migration moving.
		WithOptions(controller.Options{MaxConcurrentReconciles: 10}).
		Complete(r)
}

// Reconcile runs one step of a Machine's handover.
func (r *MachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s := &machineSubject{mapi: &machinev1beta1.Machine{}}
	if err := r.client.Get(ctx, req.NamespacedName, s.mapi); err != nil {
		r.pending.forget(req.NamespacedName)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	capi := &clusterv1.Machine{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: r.Namespaces.ClusterAPI, Name: req.Name}, capi); err == nil {
		s.capi = capi
		if err := r.getInfra(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	} else if !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	if !s.mapi.DeletionTimestamp.IsZero() || s.capi != nil && !s.capi.DeletionTimestamp.IsZero() {
		if s.mapi.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityMigrating {
			return r.settleDeletion(ctx, s)
		}
		// A Machine being deleted has nothing left to hand over.
		r.pending.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	return r.run(ctx, s)
}

// getInfra reads the metadata of the Cluster API Machine's InfraMachine, of whichever
// platform provides its kind, and the finalizers that platform's controller puts on it.
func (r *MachineReconciler) getInfra(ctx context.Context, s *machineSubject) error {
	infra, p, err := authority.InfraMetadata(ctx, r.client, r.providers, s.capi.Namespace, s.capi.Spec.InfrastructureRef,
		func(p provider.Provider) schema.GroupVersionKind { return p.InfraMachine })
	if infra != nil {
		s.infra, s.infraFinalizers, s.infraGVK = infra, p.InfraMachineFinalizers, p.InfraMachine
		s.infraPauseAck, s.infraOperatorAck = p.PauseAckAnnotation, p.PauseAckByOperator
	}
	return err
}

type machineSubject struct {
	mapi  *machinev1beta1.Machine
	capi  *clusterv1.Machine
	infra *metav1.PartialObjectMetadata
	// infraFinalizers are the finalizers the InfraMachine's provider controller sets.
	infraFinalizers []string
	infraGVK        schema.GroupVersionKind
	// infraRead is the whole InfraMachine once fullInfra has read it in this pass.
	infraRead *unstructured.Unstructured
	// infraPauseAck and infraOperatorAck are the provider's PauseAckAnnotation and
	// PauseAckByOperator (provider.Provider).
	infraPauseAck    string
	infraOperatorAck bool
}

func (s *machineSubject) mapiObject() client.Object               { return s.mapi }
func (s *machineSubject) conditions() *[]machinev1beta1.Condition { return &s.mapi.Status.Conditions }
func (s *machineSubject) hasCAPI() bool                           { return s.capi != nil }

func (s *machineSubject) authorities() (machinev1beta1.MachineAuthority, machinev1beta1.MachineAuthority, machinev1beta1.MachineAuthority) {
	return s.mapi.Spec.AuthoritativeAPI, s.mapi.Status.AuthoritativeAPI, machinev1beta1.MachineAuthority(s.mapi.Status.SynchronizedAPI)
}

func (s *machineSubject) synchronized() (bool, string) {
	return synchronized(s.mapi.Status.Conditions, s.mapi.Status.SynchronizedGeneration, s.oldGeneration())
}

// oldGeneration is the generation of the side that is (or was, while Migrating) authoritative.
func (s *machineSubject) oldGeneration() int64 { return s.generation(oldSide(s)) }

func (s *machineSubject) generation(side machinev1beta1.MachineAuthority) int64 {
	return sideGeneration(side, s.mapi, s.capiObject())
}

func (s *machineSubject) capiObject() client.Object {
	if s.capi == nil {
		return nil
	}
	return s.capi
}

func (s *machineSubject) setAuthority(ctx context.Context, c client.Client, current, previous machinev1beta1.MachineAuthority, generation int64, cond *machinev1beta1.Condition) error {
	st := &s.mapi.Status
	return patchAuthority(ctx, c, s.mapi, authorityStatus{&st.AuthoritativeAPI, &st.SynchronizedAPI, &st.SynchronizedGeneration, &st.Conditions},
		current, previous, generation, cond)
}

// pauseCAPI pauses the Cluster API Machine, then its InfraMachine; it unpauses them the other
// way round, the provider first, each copy taking its controller's finalizer in the same write
// (the provider's first one, unless it carries one of them): an unpaused copy never lacks it,
// and the handover spends one write per copy on both.
func (s *machineSubject) pauseCAPI(ctx context.Context, c client.Client, paused bool) error {
	if paused {
		if err := setPaused(ctx, c, s.capi, true, ""); err != nil {
			return err
		}
		return setPaused(ctx, c, s.infra, true, "")
	}
	if err := setPaused(ctx, c, s.infra, false, s.infraGuard()); err != nil {
		return err
	}
	return setPaused(ctx, c, s.capi, false, clusterv1.MachineFinalizer)
}

func (s *machineSubject) capiCopies() []client.Object { return []client.Object{s.capi, s.infra} }

func (s *machineSubject) paused(side machinev1beta1.MachineAuthority) (bool, string) {
	if side == machinev1beta1.MachineAuthorityMachineAPI || s.capi == nil {
		return sidePaused(side, s.mapi.Status.Conditions, nil, 0)
	}
	return sidePaused(side, s.mapi.Status.Conditions, s.capi.Status.Conditions, s.capi.Generation)
}

// moveFinalizers: the new side's finalizers are added (and stored) before the old side's is
// removed, so the instance is never without a guard. Going to the Cluster API that includes
// the InfraMachine provider's finalizer: the provider adds it itself only on its first
// unpaused pass, and a Cluster API Machine deleted before that pass would take a finalizer-less
// InfraMachine with it at once, leaving the instance running with nothing to terminate it.
// (The handover unpauses the Cluster API copies first, which brings both finalizers, so
// there the adds find them on.) Going to the Machine API the Machine API copy is first given
// the instance the InfraMachine records, if it names none (handInstance).
func (s *machineSubject) moveFinalizers(ctx context.Context, c client.Client, to machinev1beta1.MachineAuthority) (bool, error) {
	if to == machinev1beta1.MachineAuthorityClusterAPI {
		if s.capi == nil {
			return true, nil
		}
		if added, err := addFinalizer(ctx, c, s.capi, clusterv1.MachineFinalizer); err != nil || added {
			return false, err
		}
		if added, err := s.guardInfra(ctx, c); err != nil || added {
			return false, err
		}
		removed, err := removeFinalizers(ctx, c, s.mapi, machinev1beta1.MachineFinalizer)
		return !removed, err
	}
	if handed, err := s.handInstance(ctx, c); err != nil || handed {
		return false, err
	}
	if added, err := addFinalizer(ctx, c, s.mapi, machinev1beta1.MachineFinalizer); err != nil || added {
		return false, err
	}
	if s.capi != nil {
		if removed, err := removeFinalizers(ctx, c, s.capi, clusterv1.MachineFinalizer); err != nil || removed {
			return false, err
		}
	}
	if s.infra != nil {
		if removed, err := removeFinalizers(ctx, c, s.infra, s.infraFinalizers...); err != nil || removed {
			return false, err
		}
	}
	return true, nil
}

// oldSide is the authority a subject is moving away from.
func oldSide(s subject) machinev1beta1.MachineAuthority {
	_, current, previous := s.authorities()
	if current == machinev1beta1.MachineAuthorityMigrating {
		return previous
	}
	return current
}

func synchronized(conds []machinev1beta1.Condition, syncedGen, authGen int64) (bool, string) {
	c := mapicond.Get(conds, authority.SynchronizedCondition)
	if c == nil || c.Status != "True" {
		why := "the copies have not been synchronised"
		if c != nil && c.Message != "" {
			why = "Synchronized is " + string(c.Status) + ": " + c.Message
		}
		return false, why
	}
	if syncedGen != authGen {
		return false, fmt.Sprintf("status.synchronizedGeneration is %d but the authoritative copy is at generation %d", syncedGen, authGen)
	}
	return true, ""
}

func mapiPaused(conds []machinev1beta1.Condition) (bool, string) {
	c := mapicond.Get(conds, gate.PausedCondition)
	if c == nil || c.Status != "True" {
		return false, "the Machine API copy does not report Paused=True yet"
	}
	return true, ""
}

func capiPaused(conds []metav1Condition, generation int64) (bool, string) {
	c := meta.FindStatusCondition(conds, clusterv1.PausedCondition)
	if c == nil || c.Status != "True" || c.ObservedGeneration < generation {
		return false, "the Cluster API copy does not report Paused=True yet"
	}
	return true, ""
}

// setPaused is authority.StorePaused for a copy the subject may not have (nil).
func setPaused(ctx context.Context, c client.Client, o client.Object, paused bool, finalizer string) error {
	if o == nil || isNil(o) {
		return nil
	}
	return authority.StorePaused(ctx, c, o, paused, finalizer)
}

// guardInfra puts the provider's (first) finalizer on the InfraMachine unless it carries one
// of them already or is being deleted (the API server refuses new finalizers then).
func (s *machineSubject) guardInfra(ctx context.Context, c client.Client) (bool, error) {
	f := s.infraGuard()
	if f == "" || !s.infra.GetDeletionTimestamp().IsZero() {
		return false, nil
	}
	return addFinalizer(ctx, c, s.infra, f)
}

// infraGuard is the provider finalizer the InfraMachine lacks: empty when it carries one of
// them (or there is no InfraMachine, or its provider has none).
func (s *machineSubject) infraGuard() string {
	if s.infra == nil {
		return ""
	}
	return authority.ProviderGuard(s.infra, s.infraFinalizers)
}

// addFinalizer stores a controller finalizer on the new side. Unlike patch.EnsureFinalizer it
// does not skip an object being deleted: the API server's refusal then stops the handover
// rather than letting the old side's finalizer go with no guard in its place.
func addFinalizer(ctx context.Context, c client.Client, o client.Object, f string) (bool, error) {
	return patch.Locked(ctx, c, o, func() bool { return controllerutil.AddFinalizer(o, f) })
}

func removeFinalizers(ctx context.Context, c client.Client, o client.Object, fs ...string) (bool, error) {
	return patch.RemoveFinalizer(ctx, c, o, fs...)
}
