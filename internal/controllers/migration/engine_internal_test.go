package migration

import (
	"context"
	"errors"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

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
