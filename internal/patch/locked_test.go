package patch

import (
	"context"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const fin = "example.com/f"

// otherWriter changes the stored Machine behind the back of a copy read earlier.
func otherWriter(t *testing.T, c client.Client, mutate func(*clusterv1.Machine)) {
	t.Helper()
	m := read(t, c)
	base := m.DeepCopy()
	mutate(m)
	if err := c.Patch(context.Background(), m, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

func TestEnsureFinalizerWritesOnce(t *testing.T) {
	ctx := context.Background()
	var w writes
	c := fakeClient(t, storedMachine(), &w)
	m := read(t, c)
	wrote, err := EnsureFinalizer(ctx, c, m, fin)
	if err != nil || !wrote {
		t.Fatalf("first call: wrote %v, err %v; want a write", wrote, err)
	}
	if got := read(t, c); !slices.Contains(got.Finalizers, fin) || m.ResourceVersion != got.ResourceVersion {
		t.Fatalf("stored finalizers %v resourceVersion %s, object has %s", got.Finalizers, got.ResourceVersion, m.ResourceVersion)
	}
	wrote, err = EnsureFinalizer(ctx, c, m, fin)
	if err != nil || wrote || w.main != 1 || w.status != 0 {
		t.Errorf("second call: wrote %v, err %v, writes %+v; want no write", wrote, err, w)
	}
}

// A copy read before somebody else's change gets a conflict and does not undo that change.
func TestEnsureFinalizerOnStaleCopyConflicts(t *testing.T) {
	var w writes
	c := fakeClient(t, storedMachine(), &w)
	stale := read(t, c)
	otherWriter(t, c, func(m *clusterv1.Machine) { m.Finalizers = append(m.Finalizers, "other.example.com/g") })
	_, err := EnsureFinalizer(context.Background(), c, stale, fin)
	if !apierrors.IsConflict(err) {
		t.Fatalf("err %v, want a conflict", err)
	}
	if got := read(t, c); !slices.Equal(got.Finalizers, []string{"other.example.com/g"}) {
		t.Errorf("stored finalizers %v, want only the other writer's", got.Finalizers)
	}
}

func TestEnsureFinalizerLeavesDeletingObjectAlone(t *testing.T) {
	var w writes
	m := storedMachine()
	m.Finalizers = []string{"other.example.com/g"}
	m.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	c := fakeClient(t, m, &w)
	got := read(t, c)
	wrote, err := EnsureFinalizer(context.Background(), c, got, fin)
	if err != nil || wrote || w.main != 0 || slices.Contains(got.Finalizers, fin) {
		t.Errorf("wrote %v, err %v, writes %+v, finalizers %v; want nothing added", wrote, err, w, got.Finalizers)
	}
}

func TestRemoveFinalizer(t *testing.T) {
	ctx := context.Background()
	var w writes
	m := storedMachine()
	m.Finalizers = []string{fin, "keep.example.com/k", "other.example.com/g"}
	c := fakeClient(t, m, &w)
	got := read(t, c)
	wrote, err := RemoveFinalizer(ctx, c, got, fin, "other.example.com/g")
	if err != nil || !wrote || w.main != 1 {
		t.Fatalf("wrote %v, err %v, writes %+v; want one write", wrote, err, w)
	}
	if stored := read(t, c); !slices.Equal(stored.Finalizers, []string{"keep.example.com/k"}) {
		t.Errorf("stored finalizers %v, want [keep.example.com/k]", stored.Finalizers)
	}
	if wrote, err := RemoveFinalizer(ctx, c, got, fin); err != nil || wrote || w.main != 1 {
		t.Errorf("finalizer already gone: wrote %v, err %v, writes %+v; want no write", wrote, err, w)
	}

	// An object that is gone has nothing left to remove.
	if _, err := RemoveFinalizer(ctx, c, read(t, c), "keep.example.com/k"); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, read(t, c)); err != nil {
		t.Fatal(err)
	}
	stale := got.DeepCopy()
	stale.Finalizers = []string{fin}
	if wrote, err := RemoveFinalizer(ctx, c, stale, fin); err != nil || wrote {
		t.Errorf("object gone: wrote %v, err %v; want neither", wrote, err)
	}
}

func TestLockedWritesOnlyChanges(t *testing.T) {
	ctx := context.Background()
	var w writes
	c := fakeClient(t, storedMachine(), &w)
	m := read(t, c)
	if wrote, err := Locked(ctx, c, m, func() bool { return false }); err != nil || wrote || w.main != 0 {
		t.Fatalf("no change: wrote %v, err %v, writes %+v", wrote, err, w)
	}
	wrote, err := Locked(ctx, c, m, func() bool { m.Labels = map[string]string{"a": "b"}; return true })
	if err != nil || !wrote || w.main != 1 || w.status != 0 || read(t, c).Labels["a"] != "b" {
		t.Fatalf("label change: wrote %v, err %v, writes %+v", wrote, err, w)
	}

	otherWriter(t, c, func(m *clusterv1.Machine) { m.Labels["a"] = "theirs" })
	_, err = Locked(ctx, c, m, func() bool { m.Labels["c"] = "d"; return true })
	if !apierrors.IsConflict(err) {
		t.Fatalf("stale copy: err %v, want a conflict", err)
	}
	if got := read(t, c).Labels; got["a"] != "theirs" || got["c"] != "" {
		t.Errorf("stored labels %v after a conflict, want the other writer's only", got)
	}
}

func TestLockedStatusWritesStatus(t *testing.T) {
	ctx := context.Background()
	var w writes
	c := fakeClient(t, storedMachine(), &w)
	m := read(t, c)
	wrote, err := LockedStatus(ctx, c, m, func() bool { m.Status.Phase = "Running"; return true })
	if err != nil || !wrote || w.status != 1 || w.main != 0 || read(t, c).Status.Phase != "Running" {
		t.Fatalf("wrote %v, err %v, writes %+v", wrote, err, w)
	}
	otherWriter(t, c, func(m *clusterv1.Machine) { m.Labels = map[string]string{"x": "y"} })
	if _, err := LockedStatus(ctx, c, m, func() bool { m.Status.Phase = "Failed"; return true }); !apierrors.IsConflict(err) {
		t.Errorf("stale copy: err %v, want a conflict", err)
	}
	if got := read(t, c).Status.Phase; got != "Running" {
		t.Errorf("stored phase %q after a conflict, want Running", got)
	}
}

// The Helper's EnsureFinalizer stores the finalizer alone; Finish writes the status the pass
// computed, with no second metadata write.
func TestHelperEnsureFinalizerThenFinish(t *testing.T) {
	ctx := context.Background()
	var w writes
	c := fakeClient(t, storedMachine(), &w)
	m := read(t, c)
	h := NewHelper(m, c)
	m.Status.Phase = "Provisioned"
	wrote, err := h.EnsureFinalizer(ctx, m, fin)
	if err != nil || !wrote || w.main != 1 || w.status != 0 {
		t.Fatalf("wrote %v, err %v, writes %+v; want one metadata write", wrote, err, w)
	}
	if got := read(t, c); !slices.Contains(got.Finalizers, fin) || got.Status.Phase != "Provisioning" {
		t.Fatalf("stored finalizers %v phase %q; want the finalizer and the old status", got.Finalizers, got.Status.Phase)
	}
	if wrote, err := h.EnsureFinalizer(ctx, m, fin); err != nil || wrote {
		t.Fatalf("again: wrote %v, err %v", wrote, err)
	}
	var res ctrl.Result
	var retErr error
	h.Finish(ctx, m, &res, &retErr)
	if retErr != nil || w.main != 1 || w.status != 1 || read(t, c).Status.Phase != "Provisioned" {
		t.Errorf("Finish: err %v, writes %+v, phase %q; want one status write", retErr, w, read(t, c).Status.Phase)
	}
}

// After a conflict the pass's copy is stale: Finish writes nothing and asks for another pass.
func TestHelperConflictStopsFinish(t *testing.T) {
	ctx := context.Background()
	var w writes
	c := fakeClient(t, storedMachine(), &w)
	m := read(t, c)
	h := NewHelper(m, c)
	otherWriter(t, c, func(m *clusterv1.Machine) { m.Labels = map[string]string{"x": "y"} })
	w = writes{}
	m.Status.Phase = "Provisioned"
	_, err := h.EnsureFinalizer(ctx, m, fin)
	if !apierrors.IsConflict(err) {
		t.Fatalf("err %v, want a conflict", err)
	}
	res, retErr := ctrl.Result{}, err
	h.Finish(ctx, m, &res, &retErr)
	if retErr != nil || res.RequeueAfter != ConflictRetry || w.main != 1 || w.status != 0 {
		t.Errorf("Finish after a conflict: err %v, result %+v, writes %+v; want a quiet requeue and no write", retErr, res, w)
	}
	if got := read(t, c); got.Status.Phase != "Provisioning" || len(got.Finalizers) != 0 {
		t.Errorf("stored phase %q finalizers %v; want nothing written from the stale copy", got.Status.Phase, got.Finalizers)
	}
}

// A change Go equality sees but JSON does not (a time with nanoseconds the API stores in
// seconds) writes nothing; a real change is written with the lock.
func TestStoreSkipsWhatJSONDoesNotSee(t *testing.T) {
	ctx := context.Background()
	var w writes
	c := fakeClient(t, storedMachine(), &w)
	m := read(t, c)
	base := m.DeepCopy()
	stamp := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	base.Status.LastUpdated = stamp
	m.Status.LastUpdated = metav1.Time{Time: stamp.Add(time.Millisecond)}
	if err := StoreStatus(ctx, c, m, base); err != nil || w.status != 0 {
		t.Fatalf("err %v, writes %+v; want no write", err, w)
	}
	base = m.DeepCopy()
	m.Labels = map[string]string{"a": "b"}
	if err := Store(ctx, c, m, base); err != nil || w.main != 1 {
		t.Fatalf("err %v, writes %+v; want one write", err, w)
	}
	if got := read(t, c); got.Labels["a"] != "b" {
		t.Errorf("stored labels %v", got.Labels)
	}
}

func TestLockOnly(t *testing.T) {
	for patch, want := range map[string]bool{
		`{"metadata":{"resourceVersion":"7"}}`:                   true,
		`{"metadata":{"resourceVersion":"7","finalizers":null}}`: false,
		`{"metadata":{"resourceVersion":"7"},"spec":{"a":1}}`:    false,
		`{"metadata":{"resourceVersion":"7"},"type":"Opaque"}`:   false,
		`{"status":{"phase":"Running"}}`:                         false,
		`{"metadata":{"labels":{"a":"b"}}}`:                      false,
	} {
		got, err := lockOnly([]byte(patch))
		if err != nil || got != want {
			t.Errorf("lockOnly(%s) = %v, %v; want %v", patch, got, err, want)
		}
	}
}
