package machinedeployment

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/labels/format"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/inplace"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/patch"
)

// set is a MachineSet of the MachineDeployment with the Machines it controls (shared with
// the cache: copy one before changing it).
type set struct {
	ms       *clusterv1.MachineSet
	machines []*clusterv1.Machine
	// created is false for the new MachineSet this pass is about to create.
	created bool
}

func (s *set) replicas() int32 { return ptr.Deref(s.ms.Spec.Replicas, 0) }

// revision is the MachineSet's revision annotation (0 when missing or unreadable).
func (s *set) revision() int64 {
	v, _ := strconv.ParseInt(s.ms.Annotations[clusterv1.RevisionAnnotation], 10, 64)
	return v
}

// active are the Machines not being deleted.
func (s *set) active() []*clusterv1.Machine {
	var out []*clusterv1.Machine
	for _, m := range s.machines {
		if m.DeletionTimestamp.IsZero() {
			out = append(out, m)
		}
	}
	return out
}

// deleting counts the Machines being deleted.
func (s *set) deleting() int32 { return int32(len(s.machines) - len(s.active())) }

// available counts the Machines not being deleted whose Available condition is True.
func (s *set) available() int32 {
	var n int32
	for _, m := range s.active() {
		if isAvailable(m) {
			n++
		}
	}
	return n
}

// availableAfterScale is the worst case of available() once the MachineSet has deleted the
// Machines beyond its replicas: a scale-down already decided may not show in the cache yet
// (its Machines not marked as being deleted), and those Machines may be available ones.
func (s *set) availableAfterScale() int32 {
	a := s.available()
	if extra := int32(len(s.active())) - s.replicas(); extra > 0 {
		a = max(0, a-extra)
	}
	return a
}

func isAvailable(m *clusterv1.Machine) bool {
	return meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineAvailableCondition)
}

// deploymentSets are the MachineSets of a MachineDeployment, oldest revision first, and
// every MachineSet of the namespace by name (for picking a free name).
type deploymentSets struct {
	sets []*set
	all  map[string]*clusterv1.MachineSet
	// current is the new MachineSet once the rollout step found or made it (nil while
	// paused with a template no MachineSet has).
	current *set
}

// load returns the MachineDeployment's MachineSets, adopting orphans of its Cluster that its
// selector matches, each with its Machines.
func (r *Reconciler) load(ctx context.Context, md *clusterv1.MachineDeployment) (*deploymentSets, error) {
	var list clusterv1.MachineSetList
	if err := r.Client.List(ctx, &list, client.InNamespace(md.Namespace)); err != nil {
		return nil, err
	}
	byUID := map[string]*set{}
	var sets []*set
	all := map[string]*clusterv1.MachineSet{}
	for i := range list.Items {
		ms := &list.Items[i]
		all[ms.Name] = ms
		ref := metav1.GetControllerOf(ms)
		switch {
		case ref != nil && ref.UID == md.UID:
		case ref == nil && ms.DeletionTimestamp.IsZero() && selects(md, ms):
			if err := r.adopt(ctx, md, ms); err != nil {
				if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
					continue // looked at again on its next event
				}
				return nil, err
			}
		default:
			continue
		}
		s := &set{ms: ms, created: true}
		sets = append(sets, s)
		byUID[string(ms.UID)] = s
	}
	var machines clusterv1.MachineList
	if err := r.Client.List(ctx, &machines, client.InNamespace(md.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	for i := range machines.Items {
		m := &machines.Items[i]
		if ref := metav1.GetControllerOf(m); ref != nil {
			if s, ok := byUID[string(ref.UID)]; ok {
				s.machines = append(s.machines, m)
			}
		}
	}
	// Oldest revision first: old MachineSets are scaled down in that order.
	slices.SortStableFunc(sets, func(a, b *set) int {
		if c := cmp.Compare(a.revision(), b.revision()); c != 0 {
			return c
		}
		return a.ms.CreationTimestamp.Compare(b.ms.CreationTimestamp.Time)
	})
	return &deploymentSets{sets: sets, all: all}, nil
}

// adopt makes the MachineDeployment the controller of an orphan MachineSet.
func (r *Reconciler) adopt(ctx context.Context, md *clusterv1.MachineDeployment, ms *clusterv1.MachineSet) error {
	if _, err := patch.Locked(ctx, r.Client, ms, func() bool {
		ms.OwnerReferences = append(ms.OwnerReferences, ownerRef(md))
		return true
	}); err != nil {
		return err
	}
	events.Eventf(r.Recorder, md, corev1.EventTypeNormal, "SuccessfulAdopt", "Adopted orphan MachineSet %s", ms.Name)
	return nil
}

func ownerRef(md *clusterv1.MachineDeployment) metav1.OwnerReference {
	return *metav1.NewControllerRef(md, clusterv1.GroupVersion.WithKind("MachineDeployment"))
}

// rolloutFields is the part of a machine template whose change replaces Machines: the spec
// without the fields Cluster API propagates in place (inplace.RolloutSpec); labels and
// annotations are in-place too.
func rolloutFields(t *clusterv1.MachineTemplateSpec) []byte {
	b, _ := json.Marshal(inplace.RolloutSpec(&t.Spec))
	return b
}

// rolloutAfter returns spec.rollout.after when it has passed (it then outdates every
// MachineSet created before it), else the zero time.
func rolloutAfter(md *clusterv1.MachineDeployment, now time.Time) time.Time {
	if a := md.Spec.Rollout.After; !a.IsZero() && !a.After(now) {
		return a.Time
	}
	return time.Time{}
}

// templateHash is the machine-template-hash of the MachineDeployment's template: a hash of
// its rollout fields and, once passed, spec.rollout.after; salt tells apart the (unlikely)
// collisions with a MachineSet of another template.
func templateHash(md *clusterv1.MachineDeployment, after time.Time, salt int) string {
	h := fnv.New32a()
	_, _ = h.Write(rolloutFields(&md.Spec.Template))
	if !after.IsZero() {
		_, _ = h.Write([]byte(after.UTC().Format(time.RFC3339)))
	}
	if salt > 0 {
		_, _ = h.Write([]byte{byte(salt)})
	}
	return fmt.Sprintf("%08x", h.Sum32())
}

// setName is <md>-<hash>, with the MachineDeployment's name shortened to fit a name.
func setName(md *clusterv1.MachineDeployment, hash string) string {
	base := md.Name
	if limit := 253 - len(hash) - 1; len(base) > limit {
		base = strings.TrimRight(base[:limit], "-.")
	}
	return base + "-" + hash
}

// upToDate reports whether the MachineSet can be the MachineDeployment's new one: same
// rollout fields, and created after spec.rollout.after when that has passed.
func upToDate(md *clusterv1.MachineDeployment, ms *clusterv1.MachineSet, after time.Time) bool {
	if !ms.DeletionTimestamp.IsZero() || string(rolloutFields(&ms.Spec.Template)) != string(rolloutFields(&md.Spec.Template)) {
		return false
	}
	return after.IsZero() || !ms.CreationTimestamp.Time.Before(after)
}

// newSet picks the new MachineSet among sets (the highest revision that is up to date), or
// nil when there is none.
func newSet(md *clusterv1.MachineDeployment, sets []*set, after time.Time) *set {
	var out *set
	for _, s := range sets {
		if upToDate(md, s.ms, after) {
			out = s // sets are sorted by revision
		}
	}
	return out
}

// skippedAnnotations are MachineDeployment annotations not copied to its MachineSets.
var skippedAnnotations = []string{corev1.LastAppliedConfigAnnotation, clusterv1.RevisionAnnotation, clusterv1.PausedAnnotation,
	clusterv1.DesiredReplicasAnnotation, clusterv1.MaxReplicasAnnotation}

// desiredTemplate is the new MachineSet's template: the MachineDeployment's, labelled with
// the template hash, the deployment name and the cluster name.
func desiredTemplate(md *clusterv1.MachineDeployment, hash string) clusterv1.MachineTemplateSpec {
	t := *md.Spec.Template.DeepCopy()
	t.Labels = maps.Clone(t.Labels)
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	if hash != "" { // an adopted MachineSet may have none
		t.Labels[clusterv1.MachineDeploymentUniqueLabel] = hash
	}
	t.Labels[clusterv1.MachineDeploymentNameLabel] = format.MustFormatValue(md.Name)
	t.Labels[clusterv1.ClusterNameLabel] = md.Spec.ClusterName
	return t
}

// buildSet makes the new MachineSet (not yet created) for the template hash.
func buildSet(md *clusterv1.MachineDeployment, hash string) *clusterv1.MachineSet {
	t := desiredTemplate(md, hash)
	sel := md.Spec.Selector.DeepCopy()
	if sel.MatchLabels == nil {
		sel.MatchLabels = map[string]string{}
	}
	sel.MatchLabels[clusterv1.MachineDeploymentUniqueLabel] = hash
	sel.MatchLabels[clusterv1.ClusterNameLabel] = md.Spec.ClusterName
	return &clusterv1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: setName(md, hash), Namespace: md.Namespace, Labels: maps.Clone(t.Labels),
			Annotations: map[string]string{}, OwnerReferences: []metav1.OwnerReference{ownerRef(md)}},
		Spec: clusterv1.MachineSetSpec{ClusterName: md.Spec.ClusterName, Replicas: ptr.To[int32](0), Selector: *sel,
			Template: t, MachineNaming: md.Spec.MachineNaming},
	}
}

// findOrBuildNew returns the new MachineSet: an existing one that is up to date, or one to
// create named <md>-<hash>. A MachineSet of that name that is not this MachineDeployment's
// new one (being deleted, another template) makes it try the next salt, and after a few
// gives up with an error.
func findOrBuildNew(md *clusterv1.MachineDeployment, sets []*set, all map[string]*clusterv1.MachineSet, now time.Time) (*set, error) {
	after := rolloutAfter(md, now)
	if s := newSet(md, sets, after); s != nil {
		return s, nil
	}
	for salt := range 5 {
		hash := templateHash(md, after, salt)
		if other, taken := all[setName(md, hash)]; taken {
			if !other.DeletionTimestamp.IsZero() {
				return nil, fmt.Errorf("MachineSet %s is still being deleted", other.Name)
			}
			continue
		}
		return &set{ms: buildSet(md, hash)}, nil
	}
	return nil, fmt.Errorf("no free MachineSet name for template hash %s", templateHash(md, after, 0))
}

// update is what syncSet makes of a MachineSet.
type update struct {
	// isNew: the new MachineSet, which gets the template, the MachineDeployment's
	// annotations, the revision and the replica annotations; an old one gets the
	// disable-machine-create annotation instead.
	isNew       bool
	replicas    int32
	revision    int64
	maxReplicas int32
}

// syncSet brings one MachineSet to what the MachineDeployment wants of it and stores the
// change (an optimistic-locked patch, or the creation of the new one).
func (r *Reconciler) syncSet(ctx context.Context, md *clusterv1.MachineDeployment, s *set, u update) error {
	mutate := func() bool {
		before := s.ms.DeepCopy()
		applyUpdate(md, s.ms, u)
		return !equalSets(before, s.ms)
	}
	if !s.created {
		mutate()
		if err := r.Client.Create(ctx, s.ms); err != nil {
			return fmt.Errorf("creating MachineSet %s: %w", s.ms.Name, err)
		}
		events.Eventf(r.Recorder, md, corev1.EventTypeNormal, "SuccessfulCreate", "Created MachineSet %s (revision %d) with %d replicas", s.ms.Name,
			u.revision, u.replicas)
		return nil
	}
	return r.patchSet(ctx, md, s, mutate)
}

// scaleOnly sets a MachineSet's replicas and nothing else.
func (r *Reconciler) scaleOnly(ctx context.Context, md *clusterv1.MachineDeployment, s *set, replicas int32) error {
	return r.patchSet(ctx, md, s, func() bool {
		if s.replicas() == replicas {
			return false
		}
		s.ms.Spec.Replicas = ptr.To(replicas)
		return true
	})
}

// patchSet stores mutate's change of a MachineSet and tells a change of its replicas.
func (r *Reconciler) patchSet(ctx context.Context, md *clusterv1.MachineDeployment, s *set, mutate func() bool) error {
	old := s.replicas()
	s.ms = s.ms.DeepCopy()
	if _, err := patch.Locked(ctx, r.Client, s.ms, mutate); err != nil {
		return fmt.Errorf("updating MachineSet %s: %w", s.ms.Name, err)
	}
	if n := s.replicas(); n != old {
		verb := "up"
		if n < old {
			verb = "down"
		}
		events.Eventf(r.Recorder, md, corev1.EventTypeNormal, "SuccessfulScale", "Scaled %s MachineSet %s from %d to %d replicas", verb, s.ms.Name, old, n)
	}
	return nil
}

// applyUpdate changes ms as u says.
func applyUpdate(md *clusterv1.MachineDeployment, ms *clusterv1.MachineSet, u update) {
	ms.Spec.Replicas = ptr.To(u.replicas)
	ms.Spec.Deletion.Order = md.Spec.Deletion.Order
	if ms.Annotations == nil {
		ms.Annotations = map[string]string{}
	}
	if !u.isNew {
		// An old MachineSet makes no Machines: what it loses, the new one makes up.
		ms.Annotations[clusterv1.DisableMachineCreateAnnotation] = "true"
		return
	}
	// The fields Cluster API propagates in place (labels, annotations, minReadySeconds,
	// deletion timeouts, taints) follow the MachineDeployment's template.
	hash := ms.Spec.Template.Labels[clusterv1.MachineDeploymentUniqueLabel]
	ms.Spec.Template = desiredTemplate(md, hash)
	ms.Spec.MachineNaming = md.Spec.MachineNaming
	for k, v := range md.Annotations {
		if !slices.Contains(skippedAnnotations, k) {
			ms.Annotations[k] = v
		}
	}
	ms.Annotations[clusterv1.RevisionAnnotation] = strconv.FormatInt(u.revision, 10)
	ms.Annotations[clusterv1.DesiredReplicasAnnotation] = strconv.Itoa(int(ptr.Deref(md.Spec.Replicas, 0)))
	ms.Annotations[clusterv1.MaxReplicasAnnotation] = strconv.Itoa(int(u.maxReplicas))
	delete(ms.Annotations, clusterv1.DisableMachineCreateAnnotation)
}

// equalSets compares what syncSet changes.
func equalSets(a, b *clusterv1.MachineSet) bool {
	ja, _ := json.Marshal([]any{a.Spec, a.Annotations})
	jb, _ := json.Marshal([]any{b.Spec, b.Annotations})
	return string(ja) == string(jb)
}

// markForDeletion gives Machines the delete-machine annotation, so their MachineSet deletes
// them before any other on its next scale-down.
func (r *Reconciler) markForDeletion(ctx context.Context, machines []*clusterv1.Machine) error {
	for _, m := range machines {
		m = m.DeepCopy()
		if _, err := patch.Locked(ctx, r.Client, m, func() bool {
			if m.Annotations == nil {
				m.Annotations = map[string]string{}
			}
			m.Annotations[clusterv1.DeleteMachineAnnotation] = "true"
			return true
		}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("marking Machine %s for deletion: %w", m.Name, err)
		}
	}
	return nil
}

// cleanup deletes old MachineSets that are scaled to zero and have no Machines left.
func (r *Reconciler) cleanup(ctx context.Context, md *clusterv1.MachineDeployment, olds []*set) error {
	for _, s := range olds {
		if s.replicas() != 0 || len(s.machines) > 0 || ptr.Deref(s.ms.Status.Replicas, 0) != 0 || !s.ms.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Client.Delete(ctx, s.ms, client.Preconditions{UID: &s.ms.UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting old MachineSet %s: %w", s.ms.Name, err)
		}
		events.Eventf(r.Recorder, md, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted old MachineSet %s (revision %d)", s.ms.Name, s.revision())
	}
	return nil
}
