package machinehealthcheck

import (
	"context"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	ctrl "sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/scheme"
)

// world is a MachineHealthCheck over Machines of one MachineSet, each with a Node that has
// been Ready or NotReady for an hour, in a fake API server that records deletions.
type world struct {
	r       *Reconciler
	c       client.Client
	mhc     *machinev1beta1.MachineHealthCheck
	deleted []string
	events  *record.FakeRecorder
}

type member struct {
	name     string
	ready    bool
	deleting bool
}

func newWorld(t *testing.T, maxUnhealthy *intstr.IntOrString, members ...member) *world {
	t.Helper()
	now := time.Now()
	owner := metav1.OwnerReference{APIVersion: "machine.openshift.io/v1beta1", Kind: "MachineSet", Name: "ms", UID: "ms-uid",
		Controller: ptr.To(true)}
	mhc := check("")
	mhc.Name, mhc.Namespace = "mhc", "ns"
	mhc.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{"pool": "a"}}
	mhc.Spec.MaxUnhealthy = maxUnhealthy
	objs := []client.Object{mhc}
	for _, mb := range members {
		status := corev1.ConditionFalse
		if mb.ready {
			status = corev1.ConditionTrue
		}
		node := nodeReady(status, time.Hour, now)
		node.Name = mb.name
		m := machineCreated(mb.name, 2*time.Hour, now)
		m.Namespace, m.Labels, m.OwnerReferences = "ns", map[string]string{"pool": "a"}, []metav1.OwnerReference{owner}
		m.Status.NodeRef = &corev1.ObjectReference{Kind: "Node", Name: mb.name}
		if mb.deleting {
			m.DeletionTimestamp, m.Finalizers = ptr.To(metav1.NewTime(now.Add(-time.Minute))), []string{machinev1beta1.MachineFinalizer}
		}
		objs = append(objs, node, m)
	}
	w := &world{mhc: mhc, events: record.NewFakeRecorder(10)}
	w.c = fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).
		WithStatusSubresource(&machinev1beta1.MachineHealthCheck{}).
		WithInterceptorFuncs(interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.DeleteOption) error {
			w.deleted = append(w.deleted, o.GetName())
			return c.Delete(ctx, o, opts...)
		}}).Build()
	w.r = &Reconciler{Client: w.c, Recorder: w.events}
	return w
}

// reconcile runs one pass and returns the check as stored after it.
func (w *world) reconcile(t *testing.T) *machinev1beta1.MachineHealthCheck {
	t.Helper()
	key := client.ObjectKeyFromObject(w.mhc)
	if _, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	got := &machinev1beta1.MachineHealthCheck{}
	if err := w.c.Get(context.Background(), key, got); err != nil {
		t.Fatal(err)
	}
	return got
}

func (w *world) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-w.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// A Machine being deleted (here one remediated before, whose Node is still NotReady) counts
// as a target that is not healthy, so with maxUnhealthy 1 a second unhealthy Machine waits
// for it to be gone; and it is not deleted again once remediation is allowed.
func TestReconcileCountsMachinesBeingDeleted(t *testing.T) {
	w := newWorld(t, ptr.To(intstr.FromInt32(1)),
		member{name: "going", deleting: true}, member{name: "sick"}, member{name: "fine1", ready: true}, member{name: "fine2", ready: true})
	got := w.reconcile(t)
	if ptr.Deref(got.Status.ExpectedMachines, -1) != 4 || ptr.Deref(got.Status.CurrentHealthy, -1) != 2 {
		t.Errorf("expected %d healthy %d; want 4 and 2 (the Machine being deleted counts, as not healthy)",
			ptr.Deref(got.Status.ExpectedMachines, -1), ptr.Deref(got.Status.CurrentHealthy, -1))
	}
	c := mapicond.Get(got.Status.Conditions, machinev1beta1.RemediationAllowedCondition)
	if c == nil || c.Reason != TooManyUnhealthyReason || !strings.HasSuffix(c.Message, "waiting for remediation: sick; 1 being deleted") {
		t.Errorf("condition %+v; want TooManyUnhealthy naming sick and the one being deleted", c)
	}
	if len(w.deleted) != 0 {
		t.Fatalf("deleted %v while a remediation was still under way", w.deleted)
	}

	w = newWorld(t, ptr.To(intstr.FromInt32(2)),
		member{name: "going", deleting: true}, member{name: "sick"}, member{name: "fine1", ready: true}, member{name: "fine2", ready: true})
	w.reconcile(t)
	if strings.Join(w.deleted, ",") != "sick" {
		t.Errorf("deleted %v; want only sick (going is being deleted already)", w.deleted)
	}
}

// maxUnhealthy "1", a string without '%' (the CRD's pattern allows it), is a count, as the
// integer 1 is.
func TestReconcileMaxUnhealthyPlainNumberString(t *testing.T) {
	w := newWorld(t, ptr.To(intstr.FromString("1")), member{name: "sick"}, member{name: "fine", ready: true})
	got := w.reconcile(t)
	if c := mapicond.Get(got.Status.Conditions, machinev1beta1.RemediationAllowedCondition); c == nil || c.Status != corev1.ConditionTrue {
		t.Errorf("condition %+v; want RemediationAllowed=True", c)
	}
	if strings.Join(w.deleted, ",") != "sick" || got.Status.RemediationsAllowed != 0 {
		t.Errorf("deleted %v, remediationsAllowed %d; want sick remediated and none left", w.deleted, got.Status.RemediationsAllowed)
	}

	w = newWorld(t, ptr.To(intstr.FromString("one")), member{name: "sick"}, member{name: "fine", ready: true})
	got = w.reconcile(t)
	c := mapicond.Get(got.Status.Conditions, machinev1beta1.RemediationAllowedCondition)
	if c == nil || c.Reason != "InvalidMaxUnhealthy" || !strings.Contains(c.Message, `spec.maxUnhealthy: invalid value "one"`) || len(w.deleted) != 0 {
		t.Errorf("condition %+v, deleted %v; want InvalidMaxUnhealthy naming spec.maxUnhealthy and nothing deleted", c, w.deleted)
	}
}

func TestMaxUnhealthy(t *testing.T) {
	for _, tc := range []struct {
		v    *intstr.IntOrString
		want int
	}{
		{nil, 5}, {ptr.To(intstr.FromInt32(2)), 2}, {ptr.To(intstr.FromString("3")), 3}, {ptr.To(intstr.FromString("0")), 0},
		{ptr.To(intstr.FromString("40%")), 2}, {ptr.To(intstr.FromString("50%")), 2}, {ptr.To(intstr.FromString("100%")), 5},
		{ptr.To(intstr.FromInt32(-1)), 0},
	} {
		if got, err := maxUnhealthy(tc.v, 5); err != nil || got != tc.want {
			t.Errorf("maxUnhealthy(%v, 5) = %d, %v; want %d", tc.v, got, err, tc.want)
		}
	}
	for _, s := range []string{"", "%", "x%", "three"} {
		if _, err := maxUnhealthy(ptr.To(intstr.FromString(s)), 5); err == nil {
			t.Errorf("maxUnhealthy(%q) took an invalid value", s)
		}
	}
}

// Short-circuiting sends a Warning RemediationRestricted event (the condition's reason stays
// TooManyUnhealthy), once: a pass that finds the same does not repeat it.
func TestShortCircuitEvent(t *testing.T) {
	w := newWorld(t, ptr.To(intstr.FromInt32(0)), member{name: "sick"}, member{name: "fine", ready: true})
	w.reconcile(t)
	evs := w.drainEvents()
	if len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning "+RemediationRestrictedEvent+" Remediation is not allowed") {
		t.Fatalf("events %q; want one Warning RemediationRestricted", evs)
	}
	w.reconcile(t)
	if evs := w.drainEvents(); len(evs) != 0 {
		t.Errorf("a second pass sent %q", evs)
	}
}
