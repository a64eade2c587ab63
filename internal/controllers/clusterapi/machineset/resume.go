package machineset

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/external"
	"github.com/machina-dev/machina/internal/events"
)

// resumeGrace is how old a Machine from a former template must be (a third of it for one of
// the current template) before its missing clone
// is taken for a creation that was cut short rather than one still in flight: a replica that
// has not yet noticed it lost its Lease may be between its two writes. A variable so the
// tests can shorten it.
var resumeGrace = 30 * time.Second

// clones names which of a Machine's clones are missing.
type clones struct{ infra, boot bool }

func (c clones) any() bool { return c.infra || c.boot }

// awaitsClones reports whether m is a Machine this controller created (it carries the
// template hash and its InfraMachine is named after it, as createMachine makes them) that is
// not being deleted and was never provisioned: only such a Machine can lack a clone because a
// pass was killed between createMachine's writes. An adopted Machine has no hash and its
// infrastructure is its creator's business.
func awaitsClones(m *clusterv1.Machine) bool {
	_, created := m.Annotations[TemplateHashAnnotation]
	return created && m.DeletionTimestamp.IsZero() && m.Spec.ProviderID == "" &&
		!ptr.Deref(m.Status.Initialization.InfrastructureProvisioned, false) && m.Spec.InfrastructureRef.Name == m.Name
}

// unconfirmedClones names the clones of m whose existence m's own status does not confirm.
// The Machine controller reports a clone's readiness only after reading the clone, so a
// reason other than "does not exist" or an internal error says the clone was created and no
// creation of it was cut short. Skipping these keeps a pass over a MachineSet of thousands
// of provisioning Machines from reading a clone per Machine.
func unconfirmedClones(m *clusterv1.Machine) clones {
	seen := func(condition, doesNotExist, internalError string) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, condition)
		return c != nil && c.Reason != "" && c.Reason != doesNotExist && c.Reason != internalError
	}
	return clones{
		infra: !seen(clusterv1.MachineInfrastructureReadyCondition, clusterv1.MachineInfrastructureDoesNotExistReason,
			clusterv1.MachineInfrastructureInternalErrorReason),
		boot: m.Spec.Bootstrap.ConfigRef.IsDefined() && !seen(clusterv1.MachineBootstrapConfigReadyCondition,
			clusterv1.MachineBootstrapConfigDoesNotExistReason, clusterv1.MachineBootstrapConfigInternalErrorReason),
	}
}

// reported says whether the Machine controller has reported on m's clones at all (a
// reason on its InfrastructureReady condition). Until it has, m's status cannot confirm
// them, and clonesSeen keeps them from being read on every pass.
func reported(m *clusterv1.Machine) bool {
	c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineInfrastructureReadyCondition)
	return c != nil && c.Reason != ""
}

// clonesSeen remembers, per MachineSet, the Machines whose clones a pass found while the
// Machine controller had not yet reported on them: they exist, so the Machine's creation
// was not cut short, and later passes need not read them again. While thousands of
// Machines wait for the Machine controller's first look, reading their clones on every pass
// was an eighth of the manager's CPU (capi-scale -n 5000). Only an optimisation: a new
// leader reads each clone once more, and once the Machine controller has reported, its
// status decides (a clone reported missing is read again, whatever was seen before).
type clonesSeen struct {
	mu    sync.Mutex
	bySet map[types.NamespacedName]map[types.UID]bool
}

// forget drops what is remembered of set (the set is gone, or a test plays a new leader).
func (c *clonesSeen) forget(set types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.bySet, set)
}

func (c *clonesSeen) has(set types.NamespacedName, uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bySet[set][uid]
}

// keep replaces what is remembered of set by this pass's findings, so Machines that left
// the set, or no longer wait, are forgotten.
func (c *clonesSeen) keep(set types.NamespacedName, seen map[types.UID]bool) {
	if len(seen) == 0 {
		c.forget(set)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bySet == nil {
		c.bySet = map[types.NamespacedName]map[types.UID]bool{}
	}
	c.bySet[set] = seen
}

// missingClones reads m's InfraMachine and bootstrap config (those in want) through c and
// reports which do not exist.
func missingClones(ctx context.Context, pass *external.Pass, c client.Reader, m *clusterv1.Machine, want clones) (clones, error) {
	var out clones
	check := func(ref clusterv1.ContractVersionedObjectReference) (bool, error) {
		_, err := pass.Get(ctx, c, ref, m.Namespace)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
	var err error
	if want.infra {
		if out.infra, err = check(m.Spec.InfrastructureRef); err != nil {
			return clones{}, err
		}
	}
	if ref := m.Spec.Bootstrap.ConfigRef; want.boot && ref.IsDefined() {
		if out.boot, err = check(ref); err != nil {
			return clones{}, err
		}
	}
	return out, nil
}

// finishCreations repairs the Machines whose creation a killed pass (or a leader that lost
// its Lease) left between the Machine and its clones: such a Machine never gets an instance,
// yet counts as a replica, and nothing else would ever notice. A Machine of the current
// template gets its missing clones, as createMachine would have made them; one of an older
// template cannot (its clones would come from a template it was not made from) and is
// deleted, for the scale step to replace. The steady state costs cache reads only: the API
// server is asked only about clones the cache does not show, to tell a clone missing from
// one the cache lags behind. It returns when to look again at a Machine too young to judge.
func (r *Reconciler) finishCreations(ctx context.Context, ms *clusterv1.MachineSet, machines []*clusterv1.Machine) (time.Duration, error) {
	hash := templateHash(ms)
	srcs := &templates{}
	pass := r.Resolver.Pass()
	key := client.ObjectKeyFromObject(ms)
	seen := map[types.UID]bool{}
	defer r.seen.keep(key, seen)
	var next time.Duration
	var errs []error
	for i, m := range machines {
		if !awaitsClones(m) {
			continue
		}
		want := unconfirmedClones(m)
		if !want.any() {
			continue
		}
		if !reported(m) && r.seen.has(key, m.UID) {
			seen[m.UID] = true
			continue
		}
		current := m.Annotations[TemplateHashAnnotation] == hash
		// A Machine of the current template is looked at from a third of the grace: younger,
		// its clones are almost always on their way (this process's own pass, a cache a
		// moment behind), and asking the API server about each would cost a scale-up of
		// thousands a read per Machine.
		wait := resumeGrace
		if current {
			wait = resumeGrace / 3
		}
		if age := time.Since(m.CreationTimestamp.Time); age < wait {
			next = sooner(next, wait-age)
			continue
		}
		missing, err := missingClones(ctx, pass, r.Cache, m, want)
		if err == nil && missing.any() {
			missing, err = missingClones(ctx, pass, r.Reader, m, missing)
		}
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("reading the clones of Machine %s: %w", m.Name, err))
		case !missing.any():
			if !reported(m) {
				seen[m.UID] = true
			}
		case current:
			if err := r.resumeCreation(ctx, ms, m, missing, srcs); err != nil {
				errs = append(errs, err)
			}
		default:
			if err := r.deleteUnfinished(ctx, ms, machines, i); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return next, kerrors.NewAggregate(errs)
}

// templates reads the MachineSet's templates on first use only: a pass with nothing to
// repair reads none.
type templates struct {
	read        bool
	infra, boot *cloneSource
	err         error
}

func (t *templates) get(ctx context.Context, r *Reconciler, ms *clusterv1.MachineSet) (infra, boot *cloneSource, err error) {
	if !t.read {
		t.read = true
		t.infra, t.boot, t.err = r.readTemplates(ctx, ms)
	}
	return t.infra, t.boot, t.err
}

// resumeCreation creates the missing clones of m from the current templates. A clone that
// exists after all (created meanwhile by a replica still finishing its pass) is left as is.
func (r *Reconciler) resumeCreation(ctx context.Context, ms *clusterv1.MachineSet, m *clusterv1.Machine, missing clones,
	srcs *templates) error {
	infra, boot, err := srcs.get(ctx, r, ms)
	if err != nil {
		return fmt.Errorf("finishing the creation of Machine %s: %w", m.Name, err)
	}
	for _, src := range []*cloneSource{pick(missing.infra, infra), pick(missing.boot, boot)} {
		if src == nil {
			continue
		}
		obj := src.clone(ms, m)
		if err := r.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("finishing the creation of Machine %s: creating %s %s: %w", m.Name, obj.GetKind(), obj.GetName(), err)
		}
		events.Eventf(r.Recorder, ms, corev1.EventTypeNormal, "ResumedCreation",
			"Created %s %s from %s %s for Machine %s, whose creation had been interrupted", obj.GetKind(), obj.GetName(),
			src.ref.Kind, src.ref.Name, m.Name)
	}
	return nil
}

func pick(missing bool, src *cloneSource) *cloneSource {
	if !missing {
		return nil
	}
	return src
}

// deleteUnfinished deletes machines[i], whose clone is missing and whose template has
// changed since, and marks it as going so the scale step replaces it in this pass.
func (r *Reconciler) deleteUnfinished(ctx context.Context, ms *clusterv1.MachineSet, machines []*clusterv1.Machine, i int) error {
	m := machines[i].DeepCopy() // the listed Machines are shared with the cache
	key := client.ObjectKeyFromObject(ms)
	r.expect.expectDelete(key, m.Name)
	if err := r.Client.Delete(ctx, m, client.Preconditions{UID: &m.UID}); err != nil {
		r.expect.observeDelete(key, m.Name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("deleting Machine %s, whose creation had been interrupted: %w", m.Name, err)
	}
	now := metav1.Now()
	m.DeletionTimestamp = &now
	machines[i] = m
	events.Eventf(r.Recorder, ms, corev1.EventTypeNormal, "DeletedUnfinished",
		"Deleted Machine %s: its creation had been interrupted and the template has changed since, so it is replaced", m.Name)
	return nil
}

// sooner returns the shorter of two delays, zero meaning none.
func sooner(a, b time.Duration) time.Duration {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}
