package migration

import (
	"context"
	"strconv"
	"strings"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/controllers/internal/pairwatch"
	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/patch"
)

// MachineHealthCheckReconciler migrates MachineHealthChecks. The openshift/api type has no
// authoritativeAPI fields, so the request, the current authority, where a migration started
// from and the synchronised generation are annotations on the Machine API copy (see
// authority.MHCAuthoritativeAPIAnnotation and the three after it).
type MachineHealthCheckReconciler struct {
	engine
	Namespaces authority.Namespaces
}

// NewMachineHealthCheckReconciler builds the MachineHealthCheck migration controller.
func NewMachineHealthCheckReconciler(c client.Client, ns authority.Namespaces, rec eventRecorder) *MachineHealthCheckReconciler {
	return &MachineHealthCheckReconciler{engine: engine{client: c, recorder: rec, pending: newPendingMetric("MachineHealthCheck")}, Namespaces: ns}
}

// +kubebuilder:rbac:groups=machine.openshift.io,resources=machinehealthchecks;machinehealthchecks/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinehealthchecks,verbs=get;list;watch;update;patch

// SetupWithManager watches both copies (the Cluster API copy's Paused condition moves the
// handover on).
func (r *MachineHealthCheckReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.live = mgr.GetAPIReader()
	return ctrl.NewControllerManagedBy(mgr).
		Named("migration-machinehealthcheck").
		Watches(&machinev1beta1.MachineHealthCheck{}, pairwatch.EnqueueSelf(), pairwatch.InNamespace(r.Namespaces.MachineAPI)).
		Watches(&clusterv1.MachineHealthCheck{}, pairwatch.ToMachineAPIKey(r.Namespaces.MachineAPI), pairwatch.InNamespace(r.Namespaces.ClusterAPI)).
		Complete(r)
}

// Reconcile runs one step of a MachineHealthCheck's handover.
func (r *MachineHealthCheckReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s := &mhcSubject{mapi: &machinev1beta1.MachineHealthCheck{}}
	if err := r.client.Get(ctx, req.NamespacedName, s.mapi); err != nil || !s.mapi.DeletionTimestamp.IsZero() {
		// A resource being deleted has nothing left to hand over.
		r.pending.forget(req.NamespacedName)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	capi := &clusterv1.MachineHealthCheck{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: r.Namespaces.ClusterAPI, Name: req.Name}, capi); err == nil {
		s.capi = capi
	} else if !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	return r.run(ctx, s)
}

type mhcSubject struct {
	mapi *machinev1beta1.MachineHealthCheck
	capi *clusterv1.MachineHealthCheck
}

func (s *mhcSubject) mapiObject() client.Object               { return s.mapi }
func (s *mhcSubject) conditions() *[]machinev1beta1.Condition { return &s.mapi.Status.Conditions }
func (s *mhcSubject) hasCAPI() bool                           { return s.capi != nil }

// authorities reads the request, current authority and where a migration started from. No
// request annotation means no request: the check stays where it is.
func (s *mhcSubject) authorities() (machinev1beta1.MachineAuthority, machinev1beta1.MachineAuthority, machinev1beta1.MachineAuthority) {
	a := s.mapi.Annotations
	return machinev1beta1.MachineAuthority(a[authority.MHCAuthoritativeAPIAnnotation]),
		machinev1beta1.MachineAuthority(a[authority.MHCStatusAuthoritativeAPIAnnotation]),
		machinev1beta1.MachineAuthority(a[authority.MHCSynchronizedAPIAnnotation])
}

// synchronizedGeneration is the authoritative copy's generation the sync controller last
// made the mirror equal to (0 when it never did, or the annotation is not a number).
func (s *mhcSubject) synchronizedGeneration() int64 {
	g, err := strconv.ParseInt(s.mapi.Annotations[authority.MHCSynchronizedGenerationAnnotation], 10, 64)
	if err != nil {
		return 0
	}
	return g
}

// refusal: a check using Cluster API-only features cannot go to the Machine API, which would
// drop them (the sync leaves them out of the Machine API copy).
func (s *mhcSubject) refusal(to machinev1beta1.MachineAuthority) string {
	if to != machinev1beta1.MachineAuthorityMachineAPI || s.capi == nil {
		return ""
	}
	_, dropped := convert.WithoutClusterAPIOnly(s.capi)
	if len(dropped) == 0 {
		return ""
	}
	return "the Cluster API copy uses what the Machine API has no field for (" + strings.Join(fieldsOf(dropped), ", ") +
		"); remove it from the Cluster API MachineHealthCheck to hand the check to the Machine API, or request ClusterAPI again"
}

func fieldsOf(ws convert.Warnings) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.Field
	}
	return out
}

func (s *mhcSubject) synchronized() (bool, string) {
	return synchronized(s.mapi.Status.Conditions, s.synchronizedGeneration(), s.generation(oldSide(s)))
}

func (s *mhcSubject) generation(side machinev1beta1.MachineAuthority) int64 {
	if s.capi == nil {
		return sideGeneration(side, s.mapi, nil)
	}
	return sideGeneration(side, s.mapi, s.capi)
}

// setAuthority records the condition first (a status patch), then the authority annotations
// (one metadata patch): a crash between the two leaves the old authority in place, and the
// next pass writes both again.
func (s *mhcSubject) setAuthority(ctx context.Context, c client.Client, current, previous machinev1beta1.MachineAuthority, generation int64, cond *machinev1beta1.Condition) error {
	if cond != nil {
		base := s.mapi.DeepCopy()
		if mapicond.Set(&s.mapi.Status.Conditions, *cond) {
			if err := patch.StoreStatus(ctx, c, s.mapi, base); err != nil {
				return err
			}
		}
	}
	base := s.mapi.DeepCopy()
	want := map[string]string{
		authority.MHCStatusAuthoritativeAPIAnnotation: string(current),
		authority.MHCSynchronizedAPIAnnotation:        string(previous),
	}
	if generation > 0 {
		want[authority.MHCSynchronizedGenerationAnnotation] = strconv.FormatInt(generation, 10)
	}
	s.mapi.Annotations = authority.MergeMap(s.mapi.Annotations, want)
	authority.SetMHCPaused(s.mapi, current)
	if equality.Semantic.DeepEqual(base.Annotations, s.mapi.Annotations) {
		return nil
	}
	return patch.Store(ctx, c, s.mapi, base)
}

func (s *mhcSubject) capiCopies() []client.Object { return []client.Object{s.capi} }

func (s *mhcSubject) pauseCAPI(ctx context.Context, c client.Client, paused bool) error {
	if s.capi == nil {
		return nil
	}
	return setPaused(ctx, c, s.capi, paused, "")
}

// paused: the Machine API MachineHealthCheck controller reports Paused=True through the
// authority gate once it sees the current-authority annotation leave MachineAPI; the Cluster
// API one reports it for the paused annotation at the copy's generation. A Machine API check
// with no Paused condition at all is run by a controller that reports none:
// machine-api-operator's, which looks at the cluster.x-k8s.io/paused annotation (written with
// the authority, authority.SetMHCPaused) at the start of every pass and does nothing past it, so
// the stored annotation is all the acknowledgement there is.
func (s *mhcSubject) paused(side machinev1beta1.MachineAuthority) (bool, string) {
	if side == machinev1beta1.MachineAuthorityMachineAPI && mapicond.Get(s.mapi.Status.Conditions, gate.PausedCondition) == nil &&
		gate.HasPausedAnnotation(s.mapi) {
		return true, ""
	}
	if side == machinev1beta1.MachineAuthorityMachineAPI || s.capi == nil {
		return sidePaused(side, s.mapi.Status.Conditions, nil, 0)
	}
	return sidePaused(side, s.mapi.Status.Conditions, s.capi.Status.Conditions, s.capi.Generation)
}

// moveFinalizers: neither API's MachineHealthCheck controller puts a finalizer on its
// checks (only the sync finalizer is there, on both copies, and it stays), so there is
// nothing to move.
func (s *mhcSubject) moveFinalizers(context.Context, client.Client, machinev1beta1.MachineAuthority) (bool, error) {
	return true, nil
}
