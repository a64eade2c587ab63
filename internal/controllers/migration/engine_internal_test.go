package migration

import (
	"context"
	"errors"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/scheme"
)

// A request the sync has not synchronised is refused on the Migration condition, with a
// warning event; when the condition cannot be stored the pass fails with the write's error
// and sends no event (the next pass, which stores it, does).
func TestConditionWriteFailureFailsThePass(t *testing.T) {
	ctx := context.Background()
	m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "openshift-machine-api", Name: "m", Generation: 2}}
	m.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
	refuse := true
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(m).WithStatusSubresource(m).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			if refuse {
				return errors.New("refused by a test")
			}
			return c.SubResource(sub).Patch(ctx, o, p, opts...)
		}}).Build()
	if err := c.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
		t.Fatal(err)
	}
	m.Status.AuthoritativeAPI = machinev1beta1.MachineAuthorityMachineAPI
	rec := record.NewFakeRecorder(10)
	e := &engine{client: c, recorder: rec, pending: newPendingMetric("Machine")}

	_, err := e.run(ctx, &machineSubject{mapi: m.DeepCopy()})
	if err == nil || len(rec.Events) != 0 {
		t.Fatalf("status write refused: err %v, %d event(s); want the write's error and no event", err, len(rec.Events))
	}
	refuse = false
	if _, err := e.run(ctx, &machineSubject{mapi: m.DeepCopy()}); err != nil {
		t.Fatal(err)
	}
	stored := &machinev1beta1.Machine{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(m), stored); err != nil {
		t.Fatal(err)
	}
	if len(stored.Status.Conditions) != 1 || stored.Status.Conditions[0].Reason != NotSynchronizedReason || len(rec.Events) != 1 {
		t.Fatalf("conditions %+v, %d event(s); want %s stored and one event", stored.Status.Conditions, len(rec.Events), NotSynchronizedReason)
	}
}

// A rollback works from the Cluster API copy as the API server has it, not as the (possibly
// older) copy the pass read: the handover's pass before it may have paused or unpaused the
// copy moments ago, from the request before it was taken back (bench soak seed 3 ended with
// both sides of a MachineSet paused, the rollback having seen nothing to unpause).
func TestRollbackReadsTheClusterAPICopyLive(t *testing.T) {
	for _, to := range []machinev1beta1.MachineAuthority{machinev1beta1.MachineAuthorityClusterAPI, machinev1beta1.MachineAuthorityMachineAPI} {
		t.Run(string(to), func(t *testing.T) {
			ctx := context.Background()
			mapi := &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: "openshift-machine-api", Name: "s", Generation: 3}}
			mapi.Spec.AuthoritativeAPI = to
			capi := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: "openshift-cluster-api", Name: "s", Generation: 2}}
			c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(mapi, capi).WithStatusSubresource(mapi, capi).Build()
			get(t, c, mapi)
			mapi.Status.AuthoritativeAPI = machinev1beta1.MachineAuthorityMigrating
			mapi.Status.SynchronizedAPI = machinev1beta1.SynchronizedAPI(to)
			if err := c.Status().Update(ctx, mapi); err != nil {
				t.Fatal(err)
			}
			// The copy the pass read: the old side as it was before the handover touched it.
			get(t, c, capi)
			authority.SetPaused(capi, to == machinev1beta1.MachineAuthorityMachineAPI)
			capi.Status.Conditions = []metav1.Condition{{Type: clusterv1.PausedCondition, Status: metav1.ConditionStatus(pausedStatus(to)), ObservedGeneration: 2, Reason: "Test", LastTransitionTime: metav1.Now()}}
			if err := c.Update(ctx, capi); err != nil {
				t.Fatal(err)
			}
			if err := c.Status().Update(ctx, capi); err != nil {
				t.Fatal(err)
			}
			stale := capi.DeepCopy()
			// What the API server has now: the handover's write, the other way.
			authority.SetPaused(capi, to != machinev1beta1.MachineAuthorityMachineAPI)
			if err := c.Update(ctx, capi); err != nil {
				t.Fatal(err)
			}

			e := &engine{client: c, live: c, recorder: record.NewFakeRecorder(10), pending: newPendingMetric("MachineSet")}
			get(t, c, mapi)
			if _, err := e.run(ctx, &machineSetSubject{mapi: mapi, capi: stale}); err != nil {
				t.Fatal(err)
			}
			get(t, c, mapi)
			get(t, c, capi)
			_, paused := capi.Annotations[clusterv1.PausedAnnotation]
			if want := to == machinev1beta1.MachineAuthorityMachineAPI; paused != want {
				t.Errorf("Cluster API copy paused %v after rolling back to %s, want %v", paused, to, want)
			}
			// Back to the Machine API, the unpaused copy's controller has yet to acknowledge the
			// new pause: the rollback waits for it. Back to the Cluster API it is done.
			want := to
			if to == machinev1beta1.MachineAuthorityMachineAPI {
				want = machinev1beta1.MachineAuthorityMigrating
			}
			if mapi.Status.AuthoritativeAPI != want {
				t.Errorf("status.authoritativeAPI %s after rolling back to %s, want %s", mapi.Status.AuthoritativeAPI, to, want)
			}
		})
	}
}

func pausedStatus(to machinev1beta1.MachineAuthority) string {
	if to == machinev1beta1.MachineAuthorityMachineAPI {
		return "True"
	}
	return "False"
}

func get(t *testing.T, c client.Client, o client.Object) {
	t.Helper()
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(o), o); err != nil {
		t.Fatal(err)
	}
}
