// Package inplace holds what Cluster API changes on existing objects instead of replacing
// them: the metadata of a machine template (labels, annotations) and, in its spec,
// minReadySeconds, the node drain, volume detach and node deletion timeouts and the taints.
// A MachineDeployment's template hash ignores these fields; a MachineSet or MachinePool
// copies them onto its existing Machines (a MachinePool all but the taints).
package inplace

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/patch"
)

// RolloutSpec returns a copy of spec without the fields changed in place: what is left is
// what replaces Machines when it changes.
func RolloutSpec(spec *clusterv1.MachineSpec) *clusterv1.MachineSpec {
	s := spec.DeepCopy()
	s.MinReadySeconds = nil
	s.Deletion.NodeDrainTimeoutSeconds = nil
	s.Deletion.NodeVolumeDetachTimeoutSeconds = nil
	s.Deletion.NodeDeletionTimeoutSeconds = nil
	s.Taints = nil
	return s
}

// Template is what Apply and Propagate copy onto existing Machines.
type Template struct {
	Meta clusterv1.ObjectMeta
	// Spec holds the in-place fields; nil copies the metadata only.
	Spec *clusterv1.MachineSpec
	// Taints makes spec.taints follow Spec's exactly too, as a MachineSet's Machines do. The
	// Cluster API refuses taints on a MachinePool's template and leaves its Machines' alone.
	Taints bool
}

// Apply copies the in-place fields of a template onto m and reports whether m changed.
// Template labels and annotations are added or overwritten (a key dropped from the template
// stays on the Machine); minReadySeconds, the drain and volume detach timeouts and (with
// t.Taints) the taints follow the template exactly; the node deletion timeout only when the
// template sets one (admission gives every Machine a default).
func Apply(m *clusterv1.Machine, t Template) bool {
	meta, spec := t.Meta, t.Spec
	changed := false
	for k, v := range meta.Labels {
		if cur, ok := m.Labels[k]; !ok || cur != v {
			if m.Labels == nil {
				m.Labels = map[string]string{}
			}
			m.Labels[k], changed = v, true
		}
	}
	for k, v := range meta.Annotations {
		if cur, ok := m.Annotations[k]; !ok || cur != v {
			if m.Annotations == nil {
				m.Annotations = map[string]string{}
			}
			m.Annotations[k], changed = v, true
		}
	}
	if spec == nil {
		return changed
	}
	d, td := &m.Spec.Deletion, spec.Deletion
	changed = set(&m.Spec.MinReadySeconds, spec.MinReadySeconds) || changed
	changed = set(&d.NodeDrainTimeoutSeconds, td.NodeDrainTimeoutSeconds) || changed
	changed = set(&d.NodeVolumeDetachTimeoutSeconds, td.NodeVolumeDetachTimeoutSeconds) || changed
	if td.NodeDeletionTimeoutSeconds != nil {
		changed = set(&d.NodeDeletionTimeoutSeconds, td.NodeDeletionTimeoutSeconds) || changed
	}
	if t.Taints && !equality.Semantic.DeepEqual(m.Spec.Taints, spec.Taints) {
		m.Spec.Taints, changed = slices.Clone(spec.Taints), true
	}
	return changed
}

// needed reports whether Apply would change m, without changing it: Apply runs on a probe
// holding copies of only what it writes, not on a deep copy of m (a MachineSet's pass checks
// every one of its Machines, and deep copies of thousands of Machines, status and all, were a
// fifth of the manager's CPU at 3000).
func needed(m *clusterv1.Machine, t Template) bool {
	probe := &clusterv1.Machine{}
	probe.Labels, probe.Annotations = maps.Clone(m.Labels), maps.Clone(m.Annotations)
	probe.Spec.MinReadySeconds, probe.Spec.Deletion = m.Spec.MinReadySeconds, m.Spec.Deletion
	probe.Spec.Taints = m.Spec.Taints // Apply replaces the slice, never writes into it
	return Apply(probe, t)
}

func set(dst **int32, v *int32) bool {
	if ptr.Equal(*dst, v) {
		return false
	}
	*dst = nil
	if v != nil {
		*dst = ptr.To(*v)
	}
	return true
}

// Propagate applies the template's in-place fields to each Machine not being deleted that
// lacks them, one optimistic-locked patch per Machine (on a copy: the listed Machines may be
// shared with the cache). It returns how many Machines it changed and whether one changed
// under it (an optimistic-lock conflict: the caller looks again soon, on fresh data, rather
// than failing the pass). The paused mirror of a Machine the Machine API owns (its MachineSet
// moved to the Cluster API alone) is left to the sync, which writes it from the Machine API
// copy: both writing it would undo each other for ever.
func Propagate(ctx context.Context, c client.Client, machines []*clusterv1.Machine, t Template) (changed int, stale bool, err error) {
	for _, m := range machines {
		if !m.DeletionTimestamp.IsZero() || gate.PausedAsMirror(m) || !needed(m, t) {
			continue
		}
		m = m.DeepCopy()
		if _, err := patch.Locked(ctx, c, m, func() bool { return Apply(m, t) }); err != nil {
			switch {
			case apierrors.IsNotFound(err):
				continue
			case apierrors.IsConflict(err):
				stale = true
				continue
			}
			return changed, stale, fmt.Errorf("updating Machine %s in place: %w", m.Name, err)
		}
		changed++
	}
	return changed, stale, nil
}
