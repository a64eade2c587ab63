package synctest

// The checks the rows assert on a settled store: of any object (by its kind, given as an
// empty object to read into), of the write log and the events, and of a Machine API Machine
// or MachineSet's authority fields (the Sync's Kind).

import (
	"slices"
	"strings"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/mapicond"
)

// Check is one assertion on a row's settled store.
type Check func(t *testing.T, h *Harness)

// IsPaused reports whether o carries the Cluster API paused annotation.
func IsPaused(o client.Object) bool {
	_, ok := o.GetAnnotations()[clusterv1.PausedAnnotation]
	return ok
}

// PairedCopy asserts that the Cluster API copy o, as read, is not being deleted, carries the
// sync finalizer and is paused as wanted.
func PairedCopy(t *testing.T, o client.Object, wantPaused bool) {
	t.Helper()
	deleting := !o.GetDeletionTimestamp().IsZero()
	if deleting || IsPaused(o) != wantPaused || !controllerutil.ContainsFinalizer(o, authority.SyncFinalizer) {
		t.Errorf("Cluster API %s %s: deleting %v, paused %v (want %v), finalizers %v", kindName(o), o.GetName(), deleting,
			IsPaused(o), wantPaused, o.GetFinalizers())
	}
}

// Absent checks that no object of o's kind ns/name exists.
func Absent(o client.Object, ns, name string) Check {
	return func(t *testing.T, h *Harness) {
		if h.Get(o, ns, name) {
			t.Errorf("%T %s/%s exists (deleting %v, finalizers %v)", o, ns, name, !o.GetDeletionTimestamp().IsZero(), o.GetFinalizers())
		}
	}
}

// Kept checks that the object of o's kind ns/name exists, is not being deleted, carries each
// of with and none of without.
func Kept(o client.Object, ns, name string, with, without []string) Check {
	return func(t *testing.T, h *Harness) {
		if !h.Get(o, ns, name) {
			t.Fatalf("%T %s/%s is gone", o, ns, name)
		}
		f := sets.New(o.GetFinalizers()...)
		if !o.GetDeletionTimestamp().IsZero() || !f.HasAll(with...) || f.HasAny(without...) {
			t.Errorf("%T %s/%s: deleting %v, finalizers %v; want kept with %v, without %v", o, ns, name,
				!o.GetDeletionTimestamp().IsZero(), o.GetFinalizers(), with, without)
		}
	}
}

// BeingDeleted checks that the object of o's kind ns/name is being deleted and still carries
// exactly finalizers (it waits on another controller).
func BeingDeleted(o client.Object, ns, name string, finalizers ...string) Check {
	return func(t *testing.T, h *Harness) {
		if !h.Get(o, ns, name) {
			t.Fatalf("%T %s/%s is gone; it should wait", o, ns, name)
		}
		if o.GetDeletionTimestamp().IsZero() || !sets.New(o.GetFinalizers()...).Equal(sets.New(finalizers...)) {
			t.Errorf("%T %s/%s: deleting %v, finalizers %v, want deleting with %v", o, ns, name, !o.GetDeletionTimestamp().IsZero(),
				o.GetFinalizers(), finalizers)
		}
	}
}

// HasFinalizers checks that the Cluster API namespace's object of o's kind name carries
// each of f.
func HasFinalizers(o client.Object, name string, f ...string) Check {
	return func(t *testing.T, h *Harness) {
		if !h.Get(o, ClusterAPINamespace, name) {
			t.Fatalf("%T %s does not exist", o, name)
		}
		for _, x := range f {
			if !controllerutil.ContainsFinalizer(o, x) {
				t.Errorf("%T %s finalizers %v, want %s among them", o, name, o.GetFinalizers(), x)
			}
		}
	}
}

// LabelIs checks that the object of o's kind ns/name has label k=v.
func LabelIs(o client.Object, ns, name, k, v string) Check {
	return func(t *testing.T, h *Harness) {
		if !h.Get(o, ns, name) || o.GetLabels()[k] != v {
			t.Errorf("%T %s/%s labels %v, want %s=%s", o, ns, name, o.GetLabels(), k, v)
		}
	}
}

// ControlledBy checks that the object of o's kind ns/name has the controller of uid; none
// when uid is empty.
func ControlledBy(o client.Object, ns, name string, uid types.UID) Check {
	return func(t *testing.T, h *Harness) {
		if !h.Get(o, ns, name) {
			t.Fatalf("%T %s/%s does not exist", o, ns, name)
		}
		ref := metav1.GetControllerOf(o)
		if uid == "" && ref != nil || uid != "" && (ref == nil || ref.UID != uid) {
			t.Errorf("%T %s/%s controller %v, want uid %q", o, ns, name, ref, uid)
		}
	}
}

// NotOwnedBy checks that the object of o's kind ns/name has no owner reference to uid.
func NotOwnedBy(o client.Object, ns, name string, uid types.UID) Check {
	return func(t *testing.T, h *Harness) {
		if !h.Get(o, ns, name) {
			t.Fatalf("%T %s/%s is gone", o, ns, name)
		}
		if slices.ContainsFunc(o.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return r.UID == uid }) {
			t.Errorf("%T %s/%s still owned by uid %s: %v", o, ns, name, uid, o.GetOwnerReferences())
		}
	}
}

// Unwritten checks that the object of o's kind and key exists as the row created it (no write
// reached it; the fake API server's resourceVersion of a seeded object is 999).
func Unwritten(o client.Object, ns, name string) Check {
	return func(t *testing.T, h *Harness) {
		if !h.Get(o, ns, name) {
			t.Fatalf("%T %s/%s is gone", o, ns, name)
		}
		if o.GetResourceVersion() != "999" {
			t.Errorf("%T %s/%s was written (resourceVersion %s)", o, ns, name, o.GetResourceVersion())
		}
	}
}

// NoWritesIn checks that not one write request went to namespace ns.
func NoWritesIn(ns string) Check {
	return func(t *testing.T, h *Harness) {
		for _, w := range h.writes {
			if strings.Contains(w, " "+ns+"/") {
				t.Errorf("written in %s: %s", ns, w)
			}
		}
	}
}

// EventSeen checks that an event of reason was recorded, its message holding each of msg.
func EventSeen(reason string, msg ...string) Check {
	return func(t *testing.T, h *Harness) {
		for _, e := range h.events {
			if strings.Contains(e, " "+reason+" ") && !slices.ContainsFunc(msg, func(m string) bool { return !strings.Contains(e, m) }) {
				return
			}
		}
		if len(msg) == 0 {
			t.Errorf("no %s event among %q", reason, h.events)
		} else {
			t.Errorf("no %s event naming %q among %q", reason, msg, h.events)
		}
	}
}

// Requeued checks that the settled pass asks to be run again later (a wait on another
// controller).
func Requeued() Check {
	return func(t *testing.T, h *Harness) {
		if h.last.RequeueAfter <= 0 {
			t.Errorf("the settled pass returned %+v: the wait is not retried", h.last)
		}
	}
}

// The checks below are of the Machine API copy name, a Machine or a MachineSet (the Sync's
// Kind), whose authority is in its spec and status.

// AuthorityIs checks status.authoritativeAPI and the sync finalizer on the Machine API copy.
func AuthorityIs(name string, a machinev1beta1.MachineAuthority, syncFinalizer bool) Check {
	return func(t *testing.T, h *Harness) {
		o := h.machineAPI(name)
		f := authorityOf(o)
		if *f.status != a || controllerutil.ContainsFinalizer(o, authority.SyncFinalizer) != syncFinalizer {
			t.Errorf("Machine API %s %s: status.authoritativeAPI %q (want %q), finalizers %v (sync finalizer wanted: %v)",
				kindName(o), name, *f.status, a, o.GetFinalizers(), syncFinalizer)
		}
	}
}

// RequestedIs checks spec.authoritativeAPI of the Machine API copy.
func RequestedIs(name string, a machinev1beta1.MachineAuthority) Check {
	return func(t *testing.T, h *Harness) {
		o := h.machineAPI(name)
		if got := *authorityOf(o).spec; got != a {
			t.Errorf("Machine API %s %s: spec.authoritativeAPI %q, want %q", kindName(o), name, got, a)
		}
	}
}

// SynchronizedAPIIs checks status.synchronizedAPI of the Machine API copy.
func SynchronizedAPIIs(name string, a machinev1beta1.SynchronizedAPI) Check {
	return func(t *testing.T, h *Harness) {
		o := h.machineAPI(name)
		if got := *authorityOf(o).synchronizedAPI; got != a {
			t.Errorf("Machine API %s %s: status.synchronizedAPI %q, want %q", kindName(o), name, got, a)
		}
	}
}

// Synchronized checks Synchronized=True and status.synchronizedGeneration = gen.
func Synchronized(name string, gen int64) Check {
	return func(t *testing.T, h *Harness) {
		o := h.machineAPI(name)
		f := authorityOf(o)
		c := mapicond.Get(*f.conditions, authority.SynchronizedCondition)
		if c == nil || c.Status != corev1.ConditionTrue || c.Reason != authority.SynchronizedReason || *f.synchronizedGeneration != gen {
			t.Errorf("Machine API %s %s: Synchronized %+v, synchronizedGeneration %d (want True, %d)", kindName(o), name, c,
				*f.synchronizedGeneration, gen)
		}
	}
}

// NotSynchronized checks Synchronized=False with reason, its message holding each of msg, and
// status.synchronizedGeneration still gen.
func NotSynchronized(name, reason string, gen int64, msg ...string) Check {
	return func(t *testing.T, h *Harness) {
		o := h.machineAPI(name)
		f := authorityOf(o)
		c := mapicond.Get(*f.conditions, authority.SynchronizedCondition)
		if c == nil || c.Status != corev1.ConditionFalse || c.Reason != reason || *f.synchronizedGeneration != gen {
			t.Fatalf("Machine API %s %s: Synchronized %+v, synchronizedGeneration %d (want False/%s, %d)", kindName(o), name, c,
				*f.synchronizedGeneration, reason, gen)
		}
		for _, s := range msg {
			if !strings.Contains(c.Message, s) {
				t.Errorf("Synchronized message %q does not name %q", c.Message, s)
			}
		}
	}
}
