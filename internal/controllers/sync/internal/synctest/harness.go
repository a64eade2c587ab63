package synctest

// The harness: one row's fake API server, which logs every write request and checks what it
// promises as it is sent, and the sync's Reconciler over it, run until it writes nothing
// more. The rows know nothing of how many passes the sync takes or which write comes in
// which pass: only what the store holds once it has settled, and what every write must
// already promise (Sync.CheckWrite).

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/scheme"
)

// Sync is one sync controller as its rule table runs it.
type Sync struct {
	// Kind is the Machine API kind a request names, in the Machine API namespace (an empty
	// Machine, MachineSet or MachineHealthCheck); the checks of the Machine API copy read it.
	Kind client.Object
	// Base are the objects every row's store holds besides the row's own.
	Base func() []client.Object
	// Reconciler is the sync's Reconciler over the row's fake API server and recorder.
	Reconciler func(t *testing.T, c client.Client, rec record.EventRecorder) reconcile.Reconciler
	// CheckWrite, when set, returns the promises a write request breaks, seen as it is sent,
	// before the store has it; verb is create, update, patch, delete, update/<sub> or
	// patch/<sub>, and c reads the store as it stands.
	CheckWrite func(ctx context.Context, c client.Reader, verb string, o client.Object) []string
}

// Row is one line of a rule table: the objects before (besides the Sync's Base), the Machine
// API object the request names, writes the API server refuses, and what holds once the sync
// has settled.
type Row struct {
	Name   string
	Before func(t *testing.T) []client.Object
	Req    string
	// Refuse, when set, is the API server's answer to a write before it is made (nil: made).
	Refuse func(verb string, o client.Object) error
	// WantErr is in the error of the settled pass; none when empty.
	WantErr string
	Want    []Check
}

// Run settles each row from its objects and checks its end state: the settled pass's error
// as the row wants it, no write breaking a promise (CheckWrite), and each of the row's checks.
func (s Sync) Run(t *testing.T, rows []Row) {
	for _, r := range rows {
		t.Run(r.Name, func(t *testing.T) {
			h := s.newHarness(t, r.Before(t))
			h.refuse = r.Refuse
			var err error
			h.last, err = h.settle(r.Req)
			t.Logf("settled after %d passes; writes:\n%s\nevents: %q", h.passes, strings.Join(h.writes, "\n"), h.events)
			switch {
			case r.WantErr == "" && err != nil:
				t.Fatalf("settled on an error: %v", err)
			case r.WantErr != "" && (err == nil || !strings.Contains(err.Error(), r.WantErr)):
				t.Fatalf("settled with error %v, want one with %q", err, r.WantErr)
			}
			for _, v := range h.violations {
				t.Error(v)
			}
			for _, c := range r.Want {
				c(t, h)
			}
		})
	}
}

// Harness is one row's fake API server and the sync's Reconciler over it. Every write request
// is logged; events are collected.
type Harness struct {
	t    *testing.T
	sync Sync
	c    client.Client
	r    reconcile.Reconciler
	rec  *record.FakeRecorder
	// writes logs every write request, as "<verb> <kind> <namespace>/<name>".
	writes []string
	// sent counts the writes that changed the store (not those refused or changing nothing).
	sent   int
	events []string
	last   ctrl.Result
	passes int
	// violations are broken promises seen on a write as it was sent (Sync.CheckWrite).
	violations []string
	refuse     func(verb string, o client.Object) error
}

func (s Sync) newHarness(t *testing.T, objs []client.Object) *Harness {
	t.Helper()
	h := &Harness{t: t, sync: s, rec: record.NewFakeRecorder(1000)}
	always := func(err error) (bool, error) { return true, err }
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).
		WithObjects(append(s.Base(), objs...)...).
		WithStatusSubresource(&machinev1beta1.Machine{}, &clusterv1.Machine{}, &machinev1beta1.MachineSet{}, &clusterv1.MachineSet{},
			&machinev1beta1.MachineHealthCheck{}, &clusterv1.MachineHealthCheck{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
				return h.write(ctx, c, "create", o, func() (bool, error) { return always(createLikeAPIServer(ctx, c, o, opts...)) })
			},
			Update: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.UpdateOption) error {
				return h.write(ctx, c, "update", o, func() (bool, error) { return always(c.Update(ctx, o, opts...)) })
			},
			Patch: func(ctx context.Context, c client.WithWatch, o client.Object, p client.Patch, opts ...client.PatchOption) error {
				return h.write(ctx, c, "patch", o, func() (bool, error) { return always(c.Patch(ctx, o, p, opts...)) })
			},
			Delete: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.DeleteOption) error {
				return h.write(ctx, c, "delete", o, func() (bool, error) { return deleteLikeAPIServer(ctx, c, o, opts...) })
			},
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, o client.Object, opts ...client.SubResourceUpdateOption) error {
				return h.write(ctx, c, "update/"+sub, o, func() (bool, error) { return always(c.SubResource(sub).Update(ctx, o, opts...)) })
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
				return h.write(ctx, c, "patch/"+sub, o, func() (bool, error) { return always(c.SubResource(sub).Patch(ctx, o, p, opts...)) })
			},
		}).Build()
	h.c = c
	h.r = s.Reconciler(t, c, h.rec)
	return h
}

// write logs a write request, checks what it promises and sends it unless refused; one that
// changes nothing is not counted.
func (h *Harness) write(ctx context.Context, c client.Reader, verb string, o client.Object, send func() (bool, error)) error {
	h.writes = append(h.writes, fmt.Sprintf("%s %s %s/%s", verb, kindOf(o), o.GetNamespace(), o.GetName()))
	if h.refuse != nil {
		if err := h.refuse(verb, o); err != nil {
			h.writes[len(h.writes)-1] += " (refused)"
			return err
		}
	}
	if h.sync.CheckWrite != nil {
		h.violations = append(h.violations, h.sync.CheckWrite(ctx, c, verb, o)...)
	}
	sent, err := send()
	if !sent {
		h.writes[len(h.writes)-1] += " (no change)"
	} else {
		h.sent++
	}
	return err
}

// kindOf is o's group and kind (its Go type when the scheme does not know it).
func kindOf(o client.Object) string {
	if gvk, err := apiutil.GVKForObject(o, scheme.Scheme); err == nil {
		return gvk.GroupKind().String()
	}
	return fmt.Sprintf("%T", o)
}

// kindName is o's kind alone, for messages that say which API's it is.
func kindName(o client.Object) string {
	if gvk, err := apiutil.GVKForObject(o, scheme.Scheme); err == nil {
		return gvk.Kind
	}
	return fmt.Sprintf("%T", o)
}

// created numbers the uids createLikeAPIServer gives.
var created atomic.Int64

// createLikeAPIServer creates o, giving it what the API server gives a new object and the
// fake one does not: a uid (the sync tells a copy from a former one of the same name by it)
// and generation 1.
func createLikeAPIServer(ctx context.Context, c client.Client, o client.Object, opts ...client.CreateOption) error {
	uid, gen := o.GetUID(), o.GetGeneration()
	if uid == "" {
		o.SetUID(types.UID(fmt.Sprintf("created-%d", created.Add(1))))
	}
	if gen == 0 {
		o.SetGeneration(1)
	}
	err := c.Create(ctx, o, opts...)
	if err != nil {
		o.SetUID(uid)
		o.SetGeneration(gen)
	}
	return err
}

// deleteLikeAPIServer deletes o, except that a second deletion of an object already being
// deleted changes nothing, as on the API server (the fake one stores a new deletion timestamp
// and resourceVersion each time). It reports whether the store changed.
func deleteLikeAPIServer(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.DeleteOption) (bool, error) {
	stored := o.DeepCopyObject().(client.Object)
	if err := c.Get(ctx, client.ObjectKeyFromObject(o), stored); err == nil && !stored.GetDeletionTimestamp().IsZero() {
		return false, nil
	}
	return true, c.Delete(ctx, o, opts...)
}

// settle runs Reconcile for the Machine API object name until a pass changes nothing in the
// store (a write the row refuses changes nothing): the sync's fixed point, whatever number of
// passes it takes to get there. It returns that last pass's answer.
func (h *Harness) settle(name string) (ctrl.Result, error) {
	h.t.Helper()
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: MachineAPINamespace, Name: name}}
	for range maxPasses {
		n := h.sent
		h.passes++
		res, err := h.r.Reconcile(context.Background(), req)
		h.drainEvents()
		if h.sent == n {
			return res, err
		}
	}
	h.t.Fatalf("no fixed point after %d passes; writes:\n%s", maxPasses, strings.Join(h.writes, "\n"))
	return ctrl.Result{}, nil
}

func (h *Harness) drainEvents() {
	for {
		select {
		case e := <-h.rec.Events:
			h.events = append(h.events, e)
		default:
			return
		}
	}
}

// Client is the row's fake API server.
func (h *Harness) Client() client.Client { return h.c }

// Get reads ns/name into o, reporting whether it exists.
func (h *Harness) Get(o client.Object, ns, name string) bool {
	h.t.Helper()
	err := h.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, o)
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return true
}

// MustGet reads ns/name into o and returns it; the row fails when it does not exist.
func MustGet[T client.Object](h *Harness, o T, ns, name string) T {
	h.t.Helper()
	if !h.Get(o, ns, name) {
		h.t.Fatalf("%s %s/%s does not exist", kindOf(o), ns, name)
	}
	return o
}

// machineAPI reads the Machine API copy name, of the Sync's Kind.
func (h *Harness) machineAPI(name string) client.Object {
	h.t.Helper()
	return MustGet(h, h.sync.Kind.DeepCopyObject().(client.Object), MachineAPINamespace, name)
}

// The promises every write of a Cluster API copy keeps, whatever pass makes it
// (docs/migration.md), for the Syncs' CheckWrite.

// MissingSyncFinalizer is the violation of a Cluster API copy o created without the sync
// finalizer; none when it carries it.
func MissingSyncFinalizer(o client.Object) []string {
	if controllerutil.ContainsFinalizer(o, authority.SyncFinalizer) {
		return nil
	}
	return []string{fmt.Sprintf("Cluster API %s %s created without the sync finalizer", kindName(o), o.GetName())}
}

// CreatedUnpaused is the violation of a Cluster API copy o created unpaused while the Machine
// API copy name, read into mapi (a Machine or a MachineSet), does not belong to the Cluster
// API: its status.authoritativeAPI is not ClusterAPI nor, not decided yet, does its spec ask
// for it (the decision follows the spec alone). A crash right after the create must not
// leave an active mirror. None when the Machine API copy is not there.
func CreatedUnpaused(ctx context.Context, c client.Reader, o client.Object, mapi client.Object, name string) []string {
	if err := c.Get(ctx, client.ObjectKey{Namespace: MachineAPINamespace, Name: name}, mapi); err != nil || IsPaused(o) {
		return nil
	}
	f := authorityOf(mapi)
	if effectiveAuthority(*f.status, *f.spec) == ClusterAPI {
		return nil
	}
	return []string{fmt.Sprintf("%T %s created unpaused while the Machine API copy's authority is %q (requested %q)",
		o, o.GetName(), *f.status, *f.spec)}
}

// effectiveAuthority is the authority decided, or the one the spec will have decided.
func effectiveAuthority(status, spec machinev1beta1.MachineAuthority) machinev1beta1.MachineAuthority {
	if status == "" {
		return authority.InitialAuthority(spec)
	}
	return status
}
