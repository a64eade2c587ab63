package patch

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// A patch locked to a version this process's own write replaced is not sent: it fails at once
// with the conflict the API server would answer. A fresh copy, another client, or a record
// older than supersededFor are not affected; a client without a record sends every patch.
func TestPatchOfReplacedVersionNotSent(t *testing.T) {
	ctx := context.Background()
	var w writes
	c := WithWriteRecord(fakeClient(t, storedMachine(), &w))
	stale := read(t, c)
	fresh := stale.DeepCopy()
	if wrote, err := EnsureFinalizer(ctx, c, fresh, fin); err != nil || !wrote {
		t.Fatalf("first write: wrote %v, err %v", wrote, err)
	}
	setPhase := func(phase string) func() bool {
		return func() bool { stale.Status.Phase = phase; return true }
	}
	if _, err := LockedStatus(ctx, c, stale, setPhase("Running")); !apierrors.IsConflict(err) {
		t.Fatalf("patch of the replaced version: err %v, want a conflict", err)
	}
	if w.status != 0 {
		t.Fatalf("%d status patch(es) sent for a copy this process already replaced, want none", w.status)
	}

	// Another client (another manager, another API server) keeps its own record.
	var w2 writes
	c2 := WithWriteRecord(fakeClient(t, storedMachine(), &w2))
	other := read(t, c2)
	if other.ResourceVersion != stale.ResourceVersion {
		t.Fatalf("the two stores start at %s and %s: the case needs the same version", other.ResourceVersion, stale.ResourceVersion)
	}
	if _, err := LockedStatus(ctx, c2, other, func() bool { other.Status.Phase = "Running"; return true }); err != nil || w2.status != 1 {
		t.Fatalf("other client: err %v, %d status patch(es); want one, stored", err, w2.status)
	}

	// Past supersededFor the record is not trusted: the patch of the replaced version goes
	// out, and the API server answers it.
	rec := c.(*recordingClient).rec
	rec.clock = func() time.Time { return time.Now().Add(supersededFor + time.Second) }
	if _, err := LockedStatus(ctx, c, stale, setPhase("Failed")); !apierrors.IsConflict(err) || w.status != 1 {
		t.Fatalf("after %s: err %v, %d status patch(es); want the API server's conflict", supersededFor, err, w.status)
	}
	rec.clock = time.Now

	// A fresh copy goes out.
	cur := read(t, c)
	if _, err := LockedStatus(ctx, c, cur, func() bool { cur.Status.Phase = "Running"; return true }); err != nil || w.status != 2 {
		t.Fatalf("fresh copy: err %v, %d status patch(es); want the second, stored", err, w.status)
	}
}

// A client without a record (any client not made by WithWriteRecord) sends the patch of a
// replaced version, and the API server answers it.
func TestNoRecordWithoutWithWriteRecord(t *testing.T) {
	ctx := context.Background()
	var w writes
	c := fakeClient(t, storedMachine(), &w)
	stale := read(t, c)
	fresh := stale.DeepCopy()
	if _, err := EnsureFinalizer(ctx, c, fresh, fin); err != nil {
		t.Fatal(err)
	}
	if _, err := LockedStatus(ctx, c, stale, func() bool { stale.Status.Phase = "Running"; return true }); !apierrors.IsConflict(err) || w.status != 1 {
		t.Fatalf("err %v, %d status patch(es); want the API server's conflict to one patch", err, w.status)
	}
}
