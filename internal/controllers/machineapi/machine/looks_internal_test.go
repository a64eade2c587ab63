package machine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/machina-dev/machina/internal/scheme"
)

// provisionedMachine is a stored Machine API Machine with its finalizer and instance, and a
// fake client holding it.
func provisionedMachine() (*machinev1beta1.Machine, client.Client) {
	m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m",
		Finalizers: []string{machinev1beta1.MachineFinalizer}, Annotations: map[string]string{}}}
	m.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: []byte(`{"kind":"SimMachineProviderSpec"}`)}
	m.Spec.ProviderID = ptr.To("sim:///sim-east-1a/i-1")
	m.Status.AuthoritativeAPI = machinev1beta1.MachineAuthorityMachineAPI
	return m, fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(m).WithStatusSubresource(m).Build()
}

// A requeue cannot be taken back, so a look a later pass superseded still arrives: the pass
// it brings finds the Machine as the last looking pass left it before the planned time, and
// waits for the plan without a cloud call. A change of the Machine, an event of its Node, or
// a plan that is due brings a look as before.
func TestSupersededLookWaits(t *testing.T) {
	ctx := context.Background()
	m, c := provisionedMachine()
	a := &fakeActuator{exists: true, state: "running"}
	r := &Reconciler{Client: c, APIReader: c, Actuator: a, Recorder: record.NewFakeRecorder(100), Resync: time.Minute}
	key := client.ObjectKeyFromObject(m)
	pass := func(what string, wantCalls int, wantAtLeast, wantAtMost time.Duration) {
		t.Helper()
		a.calls = nil
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := strings.Count(strings.Join(a.calls, ","), "Exists"); got != wantCalls {
			t.Errorf("%s: %d instance lookups (%v), want %d", what, got, a.calls, wantCalls)
		}
		if res.RequeueAfter < wantAtLeast || res.RequeueAfter > wantAtMost {
			t.Errorf("%s: look again in %v, want %v to %v", what, res.RequeueAfter, wantAtLeast, wantAtMost)
		}
	}
	pass("first pass", 1, 47*time.Second, 73*time.Second)
	pass("a superseded requeue", 0, 40*time.Second, 73*time.Second)
	pass("and another", 0, 40*time.Second, 73*time.Second)

	// Its Node changes: the pass the event brings looks.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{NodeMachineAnnotation: "ns/m"}}}
	if reqs := r.nodeToMachine(ctx, node); len(reqs) != 1 || reqs[0].NamespacedName != key {
		t.Fatalf("Node mapped to %v", reqs)
	}
	pass("after a Node event", 1, 47*time.Second, 73*time.Second)

	// Someone changes the Machine: its pass looks.
	var stored machinev1beta1.Machine
	if err := c.Get(ctx, key, &stored); err != nil {
		t.Fatal(err)
	}
	stored.Labels = map[string]string{"team": "a"}
	if err := c.Update(ctx, &stored); err != nil {
		t.Fatal(err)
	}
	pass("after a change", 1, 47*time.Second, 73*time.Second)

	// A plan that is due is kept: the planned look happens.
	r.looks.mu.Lock()
	p := r.looks.plan[key]
	p.next = time.Now().Add(earlySlack / 2)
	r.looks.plan[key] = p
	r.looks.mu.Unlock()
	pass("the planned look", 1, 47*time.Second, 73*time.Second)

	// A pass under way when a second Node event arrives records no plan.
	r.nodeToMachine(ctx, node)
	a.onExists = func() { r.nodeToMachine(ctx, node) }
	pass("a pass racing a Node event", 1, 47*time.Second, 73*time.Second)
	a.onExists = nil
	pass("the pass the Node event queued", 1, 47*time.Second, 73*time.Second)

	// The Machine is gone: its plan is dropped.
	if err := c.Delete(ctx, &stored); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.looks.plan[key]; ok {
		t.Error("the deleted Machine's plan is kept")
	}
}

// The resync of a running Machine's instance is spread by the size of the fleet: with 1,000
// other Machines resyncing, each is looked at every 200 s (at most requeue.CloudLooks a
// second), not every minute.
func TestResyncSpreadOverTheFleet(t *testing.T) {
	ctx := context.Background()
	m, c := provisionedMachine()
	r := &Reconciler{Client: c, APIReader: c, Actuator: &fakeActuator{exists: true, state: "running"}, Recorder: record.NewFakeRecorder(100)}
	r.looks.plan = map[types.NamespacedName]look{}
	for i := range 1000 {
		r.looks.plan[types.NamespacedName{Namespace: "ns", Name: fmt.Sprint("other-", i)}] = look{rv: "1", next: time.Now().Add(time.Minute)}
	}
	res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(m)})
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter < 200*time.Second || res.RequeueAfter > 240*time.Second {
		t.Errorf("resync in %v among 1,000 other Machines, want 200 s to 240 s", res.RequeueAfter)
	}
}
