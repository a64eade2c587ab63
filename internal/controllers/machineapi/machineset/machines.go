package machineset

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/internal/provisioncap"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/patch"
	"github.com/machina-dev/machina/internal/provider"
)

// createBurst bounds how many Machines one reconcile creates or deletes in parallel.
const createBurst = 16

// validate checks what the apiserver's schema cannot: the selector must select the template.
func validate(ms *machinev1beta1.MachineSet) error {
	sel, err := metav1.LabelSelectorAsSelector(&ms.Spec.Selector)
	if err != nil {
		return fmt.Errorf("spec.selector: Invalid value: %v", err)
	}
	if sel.Empty() {
		return fmt.Errorf("spec.selector: Required value: an empty selector would select every Machine")
	}
	if !sel.Matches(labels.Set(ms.Spec.Template.ObjectMeta.Labels)) {
		return fmt.Errorf("spec.template.metadata.labels: Invalid value: %v: `selector` does not match template `labels`",
			ms.Spec.Template.ObjectMeta.Labels)
	}
	return nil
}

// ownedMachines returns the MachineSet's Machines that its selector matches, adopting the
// orphans among them. A Machine it controls whose labels no longer match is left out (not
// counted, not released).
func (r *Reconciler) ownedMachines(ctx context.Context, ms *machinev1beta1.MachineSet) ([]*machinev1beta1.Machine, error) {
	sel, err := metav1.LabelSelectorAsSelector(&ms.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("spec.selector: %w", err)
	}
	// Only the Machines the selector matches, and the cached objects themselves, not copies:
	// the set is listed on every event of its Machines, and a namespace of a thousand
	// Machines copied on each was a third of the manager's CPU while mirroring (profiled).
	// Nothing here changes a listed Machine but adopt, which copies it first.
	var list machinev1beta1.MachineList
	if err := r.Client.List(ctx, &list, client.InNamespace(ms.Namespace), client.MatchingLabelsSelector{Selector: sel},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var out []*machinev1beta1.Machine
	for i := range list.Items {
		m := &list.Items[i]
		ref := metav1.GetControllerOf(m)
		switch {
		case ref != nil && ref.UID == ms.UID:
			out = append(out, m)
		case ref == nil && m.DeletionTimestamp.IsZero():
			m = m.DeepCopy()
			if err := r.adopt(ctx, ms, m); err != nil {
				if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
					continue
				}
				return nil, err
			}
			out = append(out, m)
		}
	}
	return out, nil
}

func (r *Reconciler) adopt(ctx context.Context, ms *machinev1beta1.MachineSet, m *machinev1beta1.Machine) error {
	if _, err := patch.Locked(ctx, r.Client, m, func() bool {
		m.OwnerReferences = append(m.OwnerReferences, *ownerRef(ms))
		return true
	}); err != nil {
		return err
	}
	events.Eventf(r.Recorder, ms, corev1.EventTypeNormal, "Adopted", "Adopted orphan Machine %s", m.Name)
	return nil
}

func ownerRef(ms *machinev1beta1.MachineSet) *metav1.OwnerReference {
	return metav1.NewControllerRef(ms, machinev1beta1.GroupVersion.WithKind("MachineSet"))
}

// scale creates or deletes Machines so that the active ones equal spec.replicas.
func (r *Reconciler) scale(ctx context.Context, ms *machinev1beta1.MachineSet, machines []*machinev1beta1.Machine) error {
	var active []*machinev1beta1.Machine
	for _, m := range machines {
		if m.DeletionTimestamp.IsZero() {
			active = append(active, m)
		}
	}
	want := int(ptr.Deref(ms.Spec.Replicas, 1))
	key := client.ObjectKeyFromObject(ms)
	switch diff := want - len(active); {
	case diff > 0:
		n := provisioncap.ForSet(r.Recorder, ms, active, func(m *machinev1beta1.Machine) bool {
			return m.Status.NodeRef == nil && ptr.Deref(m.Status.Phase, "") != machinev1beta1.PhaseFailed
		}, diff)
		if n == 0 {
			return nil
		}
		r.expect.expect(key, n, 0)
		err := parallel(n, func(int) error { return r.createMachine(ctx, ms) }, func() { r.expect.observeFailedCreate(key) })
		if err != nil {
			return fmt.Errorf("creating Machines: %w", err)
		}
		events.Eventf(r.Recorder, ms, corev1.EventTypeNormal, "SuccessfulCreate", "Created %d Machine(s)%s", n, provisioncap.Waiting(diff-n, ms.Annotations))
	case diff < 0:
		victims := chooseVictims(active, -diff, ms.Spec.DeletePolicy)
		r.expect.expect(key, 0, len(victims))
		err := parallel(len(victims), func(i int) error {
			err := r.Client.Delete(ctx, victims[i])
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}, func() { r.expect.observeFailedDelete(key) })
		if err != nil {
			return fmt.Errorf("deleting Machines: %w", err)
		}
		names := make([]string, len(victims))
		for i, v := range victims {
			names[i] = v.Name
		}
		events.Eventf(r.Recorder, ms, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted Machine(s) %s", strings.Join(names, ", "))
	}
	return nil
}

// createMachine creates one Machine from the template. Its authority follows the template:
// a template that says ClusterAPI makes Machines that are Cluster API-authoritative from birth.
// Machines this process's Machine API Machine controller will reconcile (FinalizedKinds) are
// born with its finalizer, which its first pass would otherwise have to write.
func (r *Reconciler) createMachine(ctx context.Context, ms *machinev1beta1.MachineSet) error {
	t := ms.Spec.Template
	m := &machinev1beta1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Name:            machineName(ms.Name),
			Namespace:       ms.Namespace,
			Labels:          maps.Clone(t.ObjectMeta.Labels),
			Annotations:     maps.Clone(t.ObjectMeta.Annotations),
			OwnerReferences: []metav1.OwnerReference{*ownerRef(ms)},
		},
		Spec: *t.Spec.DeepCopy(),
	}
	if t.Spec.AuthoritativeAPI != machinev1beta1.MachineAuthorityClusterAPI && slices.Contains(r.FinalizedKinds, provider.SpecKind(t.Spec.ProviderSpec)) {
		m.Finalizers = []string{machinev1beta1.MachineFinalizer}
	}
	return r.Client.Create(ctx, m)
}

// machineName is <set>-<5 random characters>, shortened to stay a valid name.
func machineName(set string) string {
	if len(set) > 57 {
		set = set[:57]
	}
	return set + "-" + utilrand.String(5)
}

// parallel runs n operations, at most createBurst at a time, calling onFail for each failure.
func parallel(n int, op func(i int) error, onFail func()) error {
	var g errgroup.Group
	g.SetLimit(createBurst)
	var failed atomic.Int32
	for i := range n {
		g.Go(func() error {
			err := op(i)
			if err != nil {
				onFail()
				failed.Add(1)
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("%d of %d failed, first: %w", failed.Load(), n, err)
	}
	return nil
}

func splitKey(s string) (string, string, bool) {
	ns, name, ok := strings.Cut(s, "/")
	return ns, name, ok && ns != "" && name != ""
}

func ptrTo[T any](v T) *T { return &v }
