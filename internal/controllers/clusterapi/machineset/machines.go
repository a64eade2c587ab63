package machineset

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/labels/format"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/inplace"
	"github.com/machina-dev/machina/internal/controllers/internal/ownedby"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/patch"
)

// TemplateHashAnnotation records on each Machine a hash of the MachineSet's
// spec.template.spec it was created from; a Machine whose hash differs from the current
// template's is not up to date.
const TemplateHashAnnotation = "machineset.machina.dev/template-hash"

// createBurst bounds how many Machines one reconcile creates or deletes in parallel.
const createBurst = 16

// validate checks what the CRD schema cannot: the selector must select the template.
func validate(ms *clusterv1.MachineSet) error {
	sel, err := metav1.LabelSelectorAsSelector(&ms.Spec.Selector)
	if err != nil {
		return fmt.Errorf("spec.selector: %v", err)
	}
	if sel.Empty() {
		return fmt.Errorf("spec.selector is empty: it would select every Machine")
	}
	if !sel.Matches(labels.Set(ms.Spec.Template.Labels)) {
		return fmt.Errorf("spec.selector does not match spec.template.metadata.labels %v", ms.Spec.Template.Labels)
	}
	if !ms.Spec.Template.Spec.InfrastructureRef.IsDefined() {
		return fmt.Errorf("spec.template.spec.infrastructureRef is not set")
	}
	return nil
}

// ownedMachines returns the MachineSet's Machines, adopting orphans of its Cluster that its
// selector matches. complete is false when an orphan could not be adopted because the cached
// copy was stale: the list then lacks a Machine that is the MachineSet's to count, and no
// scaling decision may be made from it.
func (r *Reconciler) ownedMachines(ctx context.Context, ms *clusterv1.MachineSet) (machines []*clusterv1.Machine, complete bool, err error) {
	// The cached objects are shared, not copied (a MachineSet is listed on every event of its
	// Machines): anything that changes a Machine copies it first. Its own Machines and the
	// orphans come from the controller index, so a pass reads neither the rest of the
	// namespace nor other sets' Machines.
	var owned, orphans clusterv1.MachineList
	if err := ownedby.List(ctx, r.Client, &owned, ms.Namespace, ms.UID, client.UnsafeDisableDeepCopy); err != nil {
		return nil, false, err
	}
	if err := ownedby.ListOrphans(ctx, r.Client, &orphans, ms.Namespace, client.UnsafeDisableDeepCopy); err != nil {
		return nil, false, err
	}
	var out []*clusterv1.Machine
	for i := range owned.Items {
		out = append(out, &owned.Items[i])
	}
	complete = true
	for i := range orphans.Items {
		m := &orphans.Items[i]
		if !m.DeletionTimestamp.IsZero() || !selects(ms, m) {
			continue
		}
		m = m.DeepCopy()
		if err := r.adopt(ctx, ms, m); err != nil {
			switch {
			case apierrors.IsNotFound(err):
				continue // gone meanwhile
			case apierrors.IsConflict(err):
				complete = false // a fresh read next time decides again
				continue
			}
			return nil, false, err
		}
		out = append(out, m)
	}
	return out, complete, nil
}

// adopt makes the MachineSet the controller of an orphan Machine. The Machine's existing
// owner references (its Cluster's, when the Machine controller linked it) stay.
func (r *Reconciler) adopt(ctx context.Context, ms *clusterv1.MachineSet, m *clusterv1.Machine) error {
	if _, err := patch.Locked(ctx, r.Client, m, func() bool {
		m.OwnerReferences = append(m.OwnerReferences, ownerRef(ms))
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		m.Labels[clusterv1.MachineSetNameLabel] = format.MustFormatValue(ms.Name)
		return true
	}); err != nil {
		return err
	}
	events.Eventf(r.Recorder, ms, corev1.EventTypeNormal, "SuccessfulAdopt", "Adopted orphan Machine %s", m.Name)
	return nil
}

func ownerRef(ms *clusterv1.MachineSet) metav1.OwnerReference {
	return *metav1.NewControllerRef(ms, clusterv1.GroupVersion.WithKind("MachineSet"))
}

// TemplateHash is the value of TemplateHashAnnotation that Machines created from the
// MachineSet's current template carry (the Machine controller's UpToDate condition reads it).
func TemplateHash(ms *clusterv1.MachineSet) string { return templateHash(ms) }

// templateHash hashes spec.template.spec without the fields changed in place on existing
// Machines (inplace.RolloutSpec).
func templateHash(ms *clusterv1.MachineSet) string {
	b, _ := json.Marshal(inplace.RolloutSpec(&ms.Spec.Template.Spec))
	h := fnv.New32a()
	_, _ = h.Write(b)
	return fmt.Sprintf("%08x", h.Sum32())
}

// machineName applies spec.machineNaming.template ("{{ .machineSet.name }}-{{ .random }}"
// by default) and keeps the result a valid name.
func machineName(ms *clusterv1.MachineSet) string {
	tmpl := ms.Spec.MachineNaming.Template
	if tmpl == "" {
		tmpl = "{{ .machineSet.name }}-{{ .random }}"
	}
	r := strings.NewReplacer("{{ .machineSet.name }}", ms.Name, "{{ .cluster.name }}", ms.Spec.ClusterName,
		"{{ .random }}", utilrand.String(5))
	name := r.Replace(tmpl)
	if !strings.Contains(tmpl, "{{ .random }}") {
		name += "-" + utilrand.String(5)
	}
	if len(name) > 63 {
		name = strings.TrimRight(name[:57], "-.") + "-" + utilrand.String(5)
	}
	return name
}

// cloneSource is a provider template read once per reconcile and cloned per Machine.
type cloneSource struct {
	ref      clusterv1.ContractVersionedObjectReference // the template
	template *unstructured.Unstructured
	target   clusterv1.ContractVersionedObjectReference // kind of the clones, without name
	version  string                                     // API version of the clones
}

// readTemplate reads a template reference and resolves the kind its clones will have.
func (r *Reconciler) readTemplate(ctx context.Context, ref clusterv1.ContractVersionedObjectReference, ns string) (*cloneSource, error) {
	t, err := r.Resolver.Get(ctx, r.Client, ref, ns)
	if err != nil {
		return nil, fmt.Errorf("reading %s %s: %w", ref.Kind, ref.Name, err)
	}
	target := clusterv1.ContractVersionedObjectReference{APIGroup: ref.APIGroup, Kind: strings.TrimSuffix(ref.Kind, clusterv1.TemplateSuffix)}
	res, err := r.Resolver.Resolve(ctx, target)
	if err != nil {
		return nil, err
	}
	return &cloneSource{ref: ref, template: t.Unstructured, target: target, version: res.GVK.GroupVersion().String()}, nil
}

// readTemplates reads the MachineSet's InfraMachine template and, when the template names
// one, its bootstrap config template.
func (r *Reconciler) readTemplates(ctx context.Context, ms *clusterv1.MachineSet) (infra, boot *cloneSource, err error) {
	if infra, err = r.readTemplate(ctx, ms.Spec.Template.Spec.InfrastructureRef, ms.Namespace); err != nil {
		return nil, nil, err
	}
	if ref := ms.Spec.Template.Spec.Bootstrap.ConfigRef; ref.IsDefined() {
		if boot, err = r.readTemplate(ctx, ref, ms.Namespace); err != nil {
			return nil, nil, err
		}
	}
	return infra, boot, nil
}

// clone builds the object cloned from the template for Machine m.
func (s *cloneSource) clone(ms *clusterv1.MachineSet, m *clusterv1.Machine) *unstructured.Unstructured {
	spec, _, _ := unstructured.NestedMap(s.template.Object, "spec", "template", "spec")
	u := &unstructured.Unstructured{Object: map[string]any{"spec": runtime.DeepCopyJSONValue(spec)}}
	if spec == nil {
		u.Object["spec"] = map[string]any{}
	}
	u.SetAPIVersion(s.version)
	u.SetKind(s.target.Kind)
	u.SetNamespace(m.Namespace)
	u.SetName(m.Name)
	lbls, _, _ := unstructured.NestedStringMap(s.template.Object, "spec", "template", "metadata", "labels")
	if lbls == nil {
		lbls = map[string]string{}
	}
	for k, v := range ms.Spec.Template.Labels {
		lbls[k] = v
	}
	lbls[clusterv1.ClusterNameLabel] = ms.Spec.ClusterName
	lbls[clusterv1.MachineSetNameLabel] = format.MustFormatValue(ms.Name)
	u.SetLabels(lbls)
	ann, _, _ := unstructured.NestedStringMap(s.template.Object, "spec", "template", "metadata", "annotations")
	if ann == nil {
		ann = map[string]string{}
	}
	ann[clusterv1.TemplateClonedFromNameAnnotation] = s.ref.Name
	ann[clusterv1.TemplateClonedFromGroupKindAnnotation] = s.ref.Kind + "." + s.ref.APIGroup
	u.SetAnnotations(ann)
	t := true
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine",
		Name: m.Name, UID: m.UID, Controller: &t, BlockOwnerDeletion: &t}})
	return u
}

// newMachine builds a Machine from the template, referencing the clones by its own name.
func newMachine(ms *clusterv1.MachineSet, infra, boot *cloneSource) *clusterv1.Machine {
	t := ms.Spec.Template
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Name:            machineName(ms),
			Namespace:       ms.Namespace,
			Labels:          maps.Clone(t.Labels),
			Annotations:     maps.Clone(t.Annotations),
			OwnerReferences: []metav1.OwnerReference{ownerRef(ms)},
			// Born with the Machine controller's finalizer: that controller then has no
			// metadata write of its own to make, and a Machine deleted before it was ever
			// reconciled still goes through its deletion steps.
			Finalizers: []string{clusterv1.MachineFinalizer},
		},
		Spec: *t.Spec.DeepCopy(),
	}
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Labels[clusterv1.ClusterNameLabel] = ms.Spec.ClusterName
	m.Labels[clusterv1.MachineSetNameLabel] = format.MustFormatValue(ms.Name)
	m.Annotations[TemplateHashAnnotation] = templateHash(ms)
	m.Spec.ClusterName = ms.Spec.ClusterName
	m.Spec.InfrastructureRef = infra.target
	m.Spec.InfrastructureRef.Name = m.Name
	if boot != nil {
		m.Spec.Bootstrap.ConfigRef = boot.target
		m.Spec.Bootstrap.ConfigRef.Name = m.Name
	}
	return m
}

// createMachine creates one Machine and then its InfraMachine and bootstrap config, owned by
// the Machine from birth. When a clone cannot be created the Machine is deleted again; when
// the process dies between the writes, finishCreations completes the Machine later.
func (r *Reconciler) createMachine(ctx context.Context, ms *clusterv1.MachineSet, infra, boot *cloneSource) error {
	key := client.ObjectKeyFromObject(ms)
	m := newMachine(ms, infra, boot)
	r.expect.expectCreate(key, m.Name)
	if err := r.Client.Create(ctx, m); err != nil {
		r.expect.observeCreate(key, m.Name)
		return fmt.Errorf("creating Machine %s: %w", m.Name, err)
	}
	for _, src := range []*cloneSource{infra, boot} {
		if src == nil {
			continue
		}
		obj := src.clone(ms, m)
		if err := r.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			if derr := r.Client.Delete(ctx, m); derr != nil && !apierrors.IsNotFound(derr) {
				return fmt.Errorf("creating %s %s: %w (and deleting its Machine: %v)", obj.GetKind(), obj.GetName(), err, derr)
			}
			return fmt.Errorf("creating %s %s from %s %s: %w", obj.GetKind(), obj.GetName(), src.ref.Kind, src.ref.Name, err)
		}
	}
	return nil
}

// parallel runs n operations, at most createBurst at a time, and returns their errors.
func parallel(n int, op func(i int) error) []error {
	var g errgroup.Group
	g.SetLimit(createBurst)
	var mu sync.Mutex
	var errs []error
	for i := range n {
		g.Go(func() error {
			if err := op(i); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait() // every error is in errs
	return errs
}
