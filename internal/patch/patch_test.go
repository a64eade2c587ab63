package patch

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/machina-dev/machina/internal/scheme"
)

// writes counts the requests a Helper makes.
type writes struct{ main, status int }

// fakeClient stores m and, like the API server (which the fake client does not imitate
// here), moves metadata.generation on when a patch changes the spec.
func fakeClient(t *testing.T, m *clusterv1.Machine, w *writes) client.Client {
	t.Helper()
	return fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(m).WithStatusSubresource(m).
		WithInterceptorFuncs(interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
				w.main++
				var stored clusterv1.Machine
				if err := c.Get(ctx, client.ObjectKeyFromObject(obj), &stored); err != nil {
					return err
				}
				if err := c.Patch(ctx, obj, p, opts...); err != nil {
					return err
				}
				after := obj.(*clusterv1.Machine)
				if after.Spec.ProviderID != stored.Spec.ProviderID {
					after.Generation = stored.Generation + 1
					return c.Update(ctx, after)
				}
				return nil
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
				w.status++
				return c.SubResource(sub).Patch(ctx, obj, p, opts...)
			},
		}).Build()
}

func storedMachine() *clusterv1.Machine {
	return &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", Generation: 3},
		Spec:       clusterv1.MachineSpec{ClusterName: "c"},
		Status: clusterv1.MachineStatus{ObservedGeneration: 3, Phase: "Provisioning", Conditions: []metav1.Condition{
			{Type: "Old", Status: metav1.ConditionTrue, Reason: "Set", ObservedGeneration: 2, LastTransitionTime: metav1.Now()},
			{Type: "Mine", Status: metav1.ConditionFalse, Reason: "Waiting", ObservedGeneration: 3, LastTransitionTime: metav1.Now()},
		}},
	}
}

func read(t *testing.T, c client.Client) *clusterv1.Machine {
	t.Helper()
	m := &clusterv1.Machine{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "m"}, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// A pass that sets spec.providerID stores its status with the generation that write
// produced, in one status patch: no second status write just for the generation.
func TestOwnSpecChangeStoresStatusWithNewGeneration(t *testing.T) {
	var w writes
	c := fakeClient(t, storedMachine(), &w)
	m := read(t, c)
	h := NewHelper(m, c)
	m.Spec.ProviderID = "sim://r/z/i-1"
	m.Status.Phase = "Provisioned"
	meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: "Mine", Status: metav1.ConditionTrue, Reason: "Done",
		ObservedGeneration: m.Generation})
	if err := h.Patch(context.Background(), m, OwnSpecChange); err != nil {
		t.Fatal(err)
	}
	got := read(t, c)
	if w.main != 1 || w.status != 1 {
		t.Errorf("writes: %d main, %d status; want 1 and 1", w.main, w.status)
	}
	if got.Generation != 4 || got.Spec.ProviderID != "sim://r/z/i-1" || got.Status.Phase != "Provisioned" {
		t.Fatalf("stored generation %d providerID %q phase %q", got.Generation, got.Spec.ProviderID, got.Status.Phase)
	}
	if got.Status.ObservedGeneration != 4 {
		t.Errorf("status.observedGeneration %d, want 4", got.Status.ObservedGeneration)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, "Mine"); c == nil || c.ObservedGeneration != 4 || c.Reason != "Done" {
		t.Errorf("condition Mine %+v, want Done at generation 4", c)
	}
	// A condition from an older generation than the pass read says nothing about this one.
	if c := meta.FindStatusCondition(got.Status.Conditions, "Old"); c == nil || c.ObservedGeneration != 2 {
		t.Errorf("condition Old %+v, want it left at generation 2", c)
	}

	// Nothing left to write.
	if err := h.Patch(context.Background(), m, OwnSpecChange); err != nil {
		t.Fatal(err)
	}
	if w.main != 1 || w.status != 1 {
		t.Errorf("a second Patch wrote again: %d main, %d status", w.main, w.status)
	}
}

// Without the option the status keeps the generation the pass read, and only a status that
// changed is written.
func TestWithoutOwnSpecChangeStatusKeepsReadGeneration(t *testing.T) {
	var w writes
	c := fakeClient(t, storedMachine(), &w)
	m := read(t, c)
	h := NewHelper(m, c)
	m.Spec.ProviderID = "sim://r/z/i-1"
	if err := h.Patch(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	got := read(t, c)
	if w.main != 1 || w.status != 0 || got.Generation != 4 || got.Status.ObservedGeneration != 3 {
		t.Errorf("writes %+v generation %d observedGeneration %d; want one main write, generation 4, observedGeneration 3",
			w, got.Generation, got.Status.ObservedGeneration)
	}
}

// With the option, a spec change alone still records the new generation in the status
// at once, where the status named the generation the pass read.
func TestOwnSpecChangeWithUnchangedStatus(t *testing.T) {
	var w writes
	c := fakeClient(t, storedMachine(), &w)
	m := read(t, c)
	h := NewHelper(m, c)
	m.Spec.ProviderID = "sim://r/z/i-1"
	if err := h.Patch(context.Background(), m, OwnSpecChange); err != nil {
		t.Fatal(err)
	}
	got := read(t, c)
	if w.main != 1 || w.status != 1 || got.Status.ObservedGeneration != 4 {
		t.Errorf("writes %+v observedGeneration %d; want 1 main, 1 status, observedGeneration 4", w, got.Status.ObservedGeneration)
	}
}

// A mid-pass Patch with SkipStatus stores the finalizer only; the status the pass computed
// before it is still written by the closing Patch.
func TestSkipStatusKeepsStatusForTheNextPatch(t *testing.T) {
	var w writes
	c := fakeClient(t, storedMachine(), &w)
	m := read(t, c)
	h := NewHelper(m, c)
	m.Finalizers = append(m.Finalizers, "example.com/f")
	m.Status.Phase = "Provisioned"
	if err := h.Patch(context.Background(), m, SkipStatus); err != nil {
		t.Fatal(err)
	}
	got := read(t, c)
	if w.main != 1 || w.status != 0 || len(got.Finalizers) != 1 || got.Status.Phase != "Provisioning" {
		t.Fatalf("after SkipStatus: writes %+v finalizers %v phase %q; want the finalizer stored and the status not",
			w, got.Finalizers, got.Status.Phase)
	}
	if m.Status.Phase != "Provisioned" {
		t.Errorf("the object lost the status the pass wants: phase %q", m.Status.Phase)
	}
	if err := h.Patch(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	got = read(t, c)
	if w.main != 1 || w.status != 1 || got.Status.Phase != "Provisioned" {
		t.Errorf("closing patch: writes %+v phase %q; want one status write storing Provisioned", w, got.Status.Phase)
	}
}

// The deletion path's last pass removes the finalizer and sets a status (say a Deleting
// condition): the finalizer write deletes the object, so no status write follows.
func TestNoStatusWriteAfterTheLastFinalizer(t *testing.T) {
	var w writes
	stored := storedMachine()
	stored.Finalizers = []string{"example.com/f"}
	c := fakeClient(t, stored, &w)
	if err := c.Delete(context.Background(), read(t, c)); err != nil {
		t.Fatal(err)
	}
	m := read(t, c)
	if m.DeletionTimestamp.IsZero() {
		t.Fatal("the Machine is not being deleted")
	}
	h := NewHelper(m, c)
	m.Finalizers = nil
	m.Status.Phase = "Deleted"
	if err := h.Patch(context.Background(), m); err != nil {
		t.Fatalf("patch: %v", err)
	}
	if w.main != 1 || w.status != 0 {
		t.Errorf("writes %+v; want the finalizer removal only", w)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(m), &clusterv1.Machine{}); err == nil {
		t.Error("the Machine still exists after its last finalizer was removed")
	}
}
