package inplace_test

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/inplace"
	"github.com/machina-dev/machina/internal/scheme"
)

func machine(name string) *clusterv1.Machine {
	return &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns",
		Labels: map[string]string{"old": "x", "team": "red"}},
		Spec: clusterv1.MachineSpec{Deletion: clusterv1.MachineDeletionSpec{NodeDeletionTimeoutSeconds: ptr.To[int32](10),
			NodeDrainTimeoutSeconds: ptr.To[int32](5)}}}
}

func TestApply(t *testing.T) {
	m := machine("m")
	meta := clusterv1.ObjectMeta{Labels: map[string]string{"team": "blue"}, Annotations: map[string]string{"note": "n"}}
	spec := &clusterv1.MachineSpec{MinReadySeconds: ptr.To[int32](3),
		Deletion: clusterv1.MachineDeletionSpec{NodeVolumeDetachTimeoutSeconds: ptr.To[int32](40)}}
	if !inplace.Apply(m, inplace.Template{Meta: meta, Spec: spec}) {
		t.Fatal("Apply reported no change")
	}
	d := m.Spec.Deletion
	switch {
	case m.Labels["team"] != "blue" || m.Labels["old"] != "x" || m.Annotations["note"] != "n":
		t.Errorf("metadata: labels %v annotations %v (template keys set, others kept)", m.Labels, m.Annotations)
	case ptr.Deref(m.Spec.MinReadySeconds, -1) != 3 || ptr.Deref(d.NodeVolumeDetachTimeoutSeconds, -1) != 40:
		t.Errorf("minReadySeconds %v volume detach %v", m.Spec.MinReadySeconds, d.NodeVolumeDetachTimeoutSeconds)
	case d.NodeDrainTimeoutSeconds != nil:
		t.Errorf("drain timeout %d: the template has none, so the Machine has none", *d.NodeDrainTimeoutSeconds)
	case ptr.Deref(d.NodeDeletionTimeoutSeconds, -1) != 10:
		t.Errorf("node deletion timeout %v: a template without one keeps the Machine's (admission default)", d.NodeDeletionTimeoutSeconds)
	}
	if inplace.Apply(m, inplace.Template{Meta: meta, Spec: spec}) {
		t.Error("a second Apply reported a change")
	}
	// The copy is the Machine's own: changing the template afterwards does not reach it.
	*spec.MinReadySeconds = 7
	if ptr.Deref(m.Spec.MinReadySeconds, -1) != 3 {
		t.Error("Apply shared a pointer with the template")
	}
	if !inplace.Apply(m, inplace.Template{Spec: &clusterv1.MachineSpec{Deletion: clusterv1.MachineDeletionSpec{
		NodeDeletionTimeoutSeconds: ptr.To[int32](50)}}}) || ptr.Deref(m.Spec.Deletion.NodeDeletionTimeoutSeconds, -1) != 50 {
		t.Errorf("node deletion timeout %v, want 50 from the template", m.Spec.Deletion.NodeDeletionTimeoutSeconds)
	}
	if inplace.Apply(m, inplace.Template{Meta: meta}) {
		t.Error("metadata-only Apply changed a Machine that has the metadata")
	}
}

func gpu(value string) clusterv1.MachineTaint {
	return clusterv1.MachineTaint{Key: "gpu", Value: value, Effect: "NoSchedule", Propagation: clusterv1.MachineTaintPropagationAlways}
}

// Taints follow a template that asks for them exactly, as the Cluster API's MachineSet
// does: added, changed and dropped. A template that does not ask (a MachinePool's) leaves the
// Machine's taints alone.
func TestApplyTaints(t *testing.T) {
	m := machine("m")
	spec := &clusterv1.MachineSpec{Deletion: m.Spec.Deletion, Taints: []clusterv1.MachineTaint{gpu("true")}}
	if !inplace.Apply(m, inplace.Template{Spec: spec, Taints: true}) || len(m.Spec.Taints) != 1 || m.Spec.Taints[0] != gpu("true") {
		t.Fatalf("taints %v, want the template's", m.Spec.Taints)
	}
	spec.Taints[0].Value = "false"
	if m.Spec.Taints[0].Value != "true" {
		t.Error("Apply shared the taints with the template")
	}
	if !inplace.Apply(m, inplace.Template{Spec: spec, Taints: true}) || m.Spec.Taints[0].Value != "false" {
		t.Errorf("changed taint %v", m.Spec.Taints)
	}
	if inplace.Apply(m, inplace.Template{Spec: spec, Taints: true}) {
		t.Error("a second Apply reported a change")
	}
	pool := &clusterv1.MachineSpec{Deletion: m.Spec.Deletion}
	if inplace.Apply(m, inplace.Template{Spec: pool}) || len(m.Spec.Taints) != 1 {
		t.Errorf("a template without Taints changed the taints: %v", m.Spec.Taints)
	}
	if !inplace.Apply(m, inplace.Template{Spec: pool, Taints: true}) || m.Spec.Taints != nil {
		t.Errorf("taints dropped from the template stay: %v", m.Spec.Taints)
	}
}

// RolloutSpec drops exactly the in-place fields and leaves the caller's spec alone.
func TestRolloutSpec(t *testing.T) {
	spec := &machine("m").Spec
	spec.MinReadySeconds = ptr.To[int32](3)
	spec.FailureDomain = "zone-a"
	spec.Taints = []clusterv1.MachineTaint{gpu("true")}
	got := inplace.RolloutSpec(spec)
	if got.MinReadySeconds != nil || got.Deletion.NodeDrainTimeoutSeconds != nil || got.Deletion.NodeDeletionTimeoutSeconds != nil ||
		got.Taints != nil || got.FailureDomain != "zone-a" {
		t.Errorf("rollout spec %+v", got)
	}
	if spec.MinReadySeconds == nil || spec.Deletion.NodeDrainTimeoutSeconds == nil || len(spec.Taints) != 1 {
		t.Error("RolloutSpec changed its argument")
	}
}

// A Machine that changed under the propagation (optimistic-lock conflict) is skipped and
// reported as stale; the others are still updated, and Machines being deleted are left alone,
// as is the paused mirror of a Machine the Machine API owns (the sync writes it).
func TestPropagateSkipsConflicts(t *testing.T) {
	a, b, gone, mirror := machine("a"), machine("b"), machine("gone"), machine("mirror")
	gone.DeletionTimestamp, gone.Finalizers = ptr.To(metav1.Now()), []string{"f"}
	mirror.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	mirror.Finalizers = []string{authority.SyncFinalizer}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(a, b, gone, mirror).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			if obj.GetName() == "a" {
				return apierrors.NewConflict(schema.GroupResource{Resource: "machines"}, "a", nil)
			}
			return c.Patch(ctx, obj, p, opts...)
		}}).Build()
	ctx := context.Background()
	var listed []*clusterv1.Machine
	for _, name := range []string{"a", "b", "gone", "mirror"} {
		m := &clusterv1.Machine{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, m); err != nil {
			t.Fatal(err)
		}
		listed = append(listed, m)
	}
	meta := clusterv1.ObjectMeta{Labels: map[string]string{"team": "blue"}}
	changed, stale, err := inplace.Propagate(ctx, c, listed, inplace.Template{Meta: meta})
	if err != nil || changed != 1 || !stale {
		t.Fatalf("changed %d stale %v err %v, want 1 true nil", changed, stale, err)
	}
	for name, want := range map[string]string{"a": "red", "b": "blue", "gone": "red", "mirror": "red"} {
		m := &clusterv1.Machine{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, m); err != nil {
			t.Fatal(err)
		}
		if m.Labels["team"] != want {
			t.Errorf("Machine %s team=%s, want %s", name, m.Labels["team"], want)
		}
	}
	if listed[1].Labels["team"] != "red" {
		t.Error("Propagate changed the listed (cache) copy")
	}
}
