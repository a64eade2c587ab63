package mhcsync_test

// What the MachineHealthCheck rule table (rules_test.go) adds to the sync's shared harness
// (internal/synctest): the check sync as the harness runs it with the Infrastructure the
// conversion reads the cluster name from, what every create of a check's copy must promise
// (checkCreate), builders for the rows' checks, and the assertions of a MachineHealthCheck
// the rows make on the end state, whose authority is in annotations.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/controllers/sync/internal/synccommon"
	st "github.com/machina-dev/machina/internal/controllers/sync/internal/synctest"
	"github.com/machina-dev/machina/internal/controllers/sync/mhcsync"
	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/scheme"
)

const (
	mapiNS, capiNS = st.MachineAPINamespace, st.ClusterAPINamespace
	migrating      = machinev1beta1.MachineAuthorityMigrating
)

// checks is the MachineHealthCheck sync over a row's fake API server, with the
// Infrastructure.
var checks = st.Sync{
	Kind: &machinev1beta1.MachineHealthCheck{},
	Base: func() []client.Object { return []client.Object{st.Infrastructure()} },
	Reconciler: func(_ *testing.T, c client.Client, rec record.EventRecorder) reconcile.Reconciler {
		return &mhcsync.Reconciler{Client: c, Namespaces: st.Namespaces, Recorder: rec}
	},
	CheckWrite: checkCreate,
}

// checkCreate returns a Cluster API check created without the sync finalizer, or unpaused
// while the check does not belong to the Cluster API: its authority annotation is not
// ClusterAPI nor, undecided, is that requested (docs/migration.md).
func checkCreate(ctx context.Context, c client.Reader, verb string, o client.Object) []string {
	if _, ok := o.(*clusterv1.MachineHealthCheck); !ok || verb != "create" {
		return nil
	}
	v := st.MissingSyncFinalizer(o)
	m := &machinev1beta1.MachineHealthCheck{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: mapiNS, Name: o.GetName()}, m); err == nil && !st.IsPaused(o) &&
		mhcsync.Authority(m) != st.ClusterAPI && (mhcsync.Authority(m) != "" || m.Annotations[authority.MHCAuthoritativeAPIAnnotation] != string(st.ClusterAPI)) {
		v = append(v, fmt.Sprintf("Cluster API MachineHealthCheck %s created unpaused, authority %q", o.GetName(), mhcsync.Authority(m)))
	}
	return v
}

// mapiMHC is a Machine API MachineHealthCheck, generation 1, remediating Machines of set
// "workers" at most maxUnhealthy at a time, with no authority annotation unless opts add one.
func mapiMHC(name, maxUnhealthy string, opts ...st.Opt) *machinev1beta1.MachineHealthCheck {
	m := &machinev1beta1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mapiNS, UID: types.UID("mapi-mhc-" + name), Generation: 1},
		Spec: machinev1beta1.MachineHealthCheckSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"machine.openshift.io/cluster-api-machineset": "workers"}},
			UnhealthyConditions: []machinev1beta1.UnhealthyCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Timeout: metav1.Duration{Duration: 5 * time.Minute}}},
			MaxUnhealthy:       ptr.To(intstr.FromString(maxUnhealthy)),
			NodeStartupTimeout: &metav1.Duration{Duration: 10 * time.Minute},
		}}
	for _, o := range opts {
		o(m)
	}
	return m
}

// requestedMHC sets the request annotation (spec.authoritativeAPI's part).
func requestedMHC(a machinev1beta1.MachineAuthority) st.Opt {
	return func(m client.Object) { st.Annotated(m, authority.MHCAuthoritativeAPIAnnotation, string(a)) }
}

// decidedMHC sets the current authority annotation, the synchronised API, the paused annotation
// a check the Machine API does not own carries, and the sync finalizer: a check the sync has
// initialised.
func decidedMHC(a, synced machinev1beta1.MachineAuthority) st.Opt {
	return func(m client.Object) {
		st.Annotated(m, authority.MHCStatusAuthoritativeAPIAnnotation, string(a))
		st.Annotated(m, authority.MHCSynchronizedAPIAnnotation, string(authority.SynchronizedAPIOf(synced)))
		authority.SetMHCPaused(m, a)
		controllerutil.AddFinalizer(m, authority.SyncFinalizer)
	}
}

// capiMHC is the Cluster API form of mapi as the conversion library makes it, uid and
// generation 1, nothing of the sync's: someone's active check unless the row pauses or pairs it.
func capiMHC(t *testing.T, mapi *machinev1beta1.MachineHealthCheck) *clusterv1.MachineHealthCheck {
	t.Helper()
	out, _, errs := convert.ToClusterAPIMachineHealthCheck(mapi.DeepCopy(), convertContext(t))
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	for _, k := range []string{authority.MHCAuthoritativeAPIAnnotation, authority.MHCStatusAuthoritativeAPIAnnotation,
		authority.MHCSynchronizedAPIAnnotation, authority.MHCSynchronizedGenerationAnnotation, clusterv1.PausedAnnotation} {
		delete(out.Annotations, k)
	}
	out.Finalizers = nil
	out.UID, out.Generation = types.UID("capi-mhc-"+out.Name), 1
	return out
}

func convertContext(t *testing.T) convert.Context {
	t.Helper()
	cc, err := authority.ClusterContext(context.Background(), fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(st.Infrastructure()).Build(), st.Namespaces)
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

// machineAPICopy: the Machine API check's current authority, whether it carries the paused
// annotation (it does whenever the Machine API does not own it), and the sync finalizer.
func machineAPICopy(name string, a machinev1beta1.MachineAuthority, wantPaused bool) st.Check {
	return func(t *testing.T, h *st.Harness) {
		m := st.MustGet(h, &machinev1beta1.MachineHealthCheck{}, mapiNS, name)
		if mhcsync.Authority(m) != a || st.IsPaused(m) != wantPaused || !controllerutil.ContainsFinalizer(m, authority.SyncFinalizer) {
			t.Errorf("Machine API MachineHealthCheck %s: authority %q (want %q), paused %v (want %v), finalizers %v", name,
				mhcsync.Authority(m), a, st.IsPaused(m), wantPaused, m.Finalizers)
		}
	}
}

// clusterAPICopy: the Cluster API check exists, is not being deleted, carries the sync
// finalizer, is paused as wanted, has the spec of want's conversion, and none of the Machine API
// copy's authority annotations.
func clusterAPICopy(want *machinev1beta1.MachineHealthCheck, wantPaused bool) st.Check {
	return func(t *testing.T, h *st.Harness) {
		c := st.MustGet(h, &clusterv1.MachineHealthCheck{}, capiNS, want.Name)
		st.PairedCopy(t, c, wantPaused)
		if w := capiMHC(t, want); !equality.Semantic.DeepEqual(c.Spec, w.Spec) {
			t.Errorf("Cluster API MachineHealthCheck %s spec:\n%+v\nwant:\n%+v", want.Name, c.Spec, w.Spec)
		}
		for k := range c.Annotations {
			if strings.HasPrefix(k, authority.MachinaDomain) && k != synccommon.SyncedAnnotationsAnnotation && k != synccommon.SyncedLabelsAnnotation {
				t.Errorf("Cluster API MachineHealthCheck %s carries the Machine API copy's annotation %s", want.Name, k)
			}
		}
	}
}

// maxUnhealthyIs: the Machine API check's maxUnhealthy.
func maxUnhealthyIs(name, v string) st.Check {
	return func(t *testing.T, h *st.Harness) {
		m := &machinev1beta1.MachineHealthCheck{}
		if !h.Get(m, mapiNS, name) || m.Spec.MaxUnhealthy == nil || m.Spec.MaxUnhealthy.String() != v {
			t.Errorf("Machine API MachineHealthCheck %s maxUnhealthy %v, want %s", name, m.Spec.MaxUnhealthy, v)
		}
	}
}

// synchronized: Synchronized=True and the synchronised generation annotation at gen.
func synchronized(name string, gen int64) st.Check {
	return func(t *testing.T, h *st.Harness) {
		m := &machinev1beta1.MachineHealthCheck{}
		h.Get(m, mapiNS, name)
		c := mapicond.Get(m.Status.Conditions, authority.SynchronizedCondition)
		if c == nil || c.Status != corev1.ConditionTrue || m.Annotations[authority.MHCSynchronizedGenerationAnnotation] != strconv.FormatInt(gen, 10) {
			t.Errorf("Machine API MachineHealthCheck %s: Synchronized %+v, synchronized generation %q (want True, %d)", name, c,
				m.Annotations[authority.MHCSynchronizedGenerationAnnotation], gen)
		}
	}
}

// notSynchronized: Synchronized=False with reason and msg in its message.
func notSynchronized(name, reason, msg string) st.Check {
	return func(t *testing.T, h *st.Harness) {
		m := &machinev1beta1.MachineHealthCheck{}
		h.Get(m, mapiNS, name)
		c := mapicond.Get(m.Status.Conditions, authority.SynchronizedCondition)
		if c == nil || c.Status != corev1.ConditionFalse || c.Reason != reason || !strings.Contains(c.Message, msg) {
			t.Errorf("Machine API MachineHealthCheck %s: Synchronized %+v, want False/%s naming %q", name, c, reason, msg)
		}
	}
}

// keptReleased: the Cluster API check exists, is not being deleted, and has no sync finalizer.
func keptReleased(name string) st.Check {
	return st.Kept(&clusterv1.MachineHealthCheck{}, capiNS, name, nil, []string{authority.SyncFinalizer})
}
