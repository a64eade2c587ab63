package machine

import (
	"context"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/scheme"
)

// A Machine deleted while its controller stores the finalizer can be removed with the
// finalizer on (kubernetes/kubernetes#77988): the write is answered 200 and the object is
// gone. The pass then launches nothing, for nothing would be left to terminate the instance.
// The fake API server here does exactly that to the finalizer's write; a Machine that keeps
// its finalizer gets its instance in the same pass.
func TestNoInstanceForMachineDeletedWithItsFinalizer(t *testing.T) {
	for _, vanish := range []bool{true, false} {
		ctx := context.Background()
		m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", Annotations: map[string]string{}}}
		m.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: []byte(`{"kind":"SimMachineProviderSpec"}`)}
		m.Status.AuthoritativeAPI = machinev1beta1.MachineAuthorityMachineAPI
		c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(m).WithStatusSubresource(m).
			WithInterceptorFuncs(interceptor.Funcs{
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
					if err := c.Patch(ctx, obj, p, opts...); err != nil || !vanish || !controllerutil.ContainsFinalizer(obj, machinev1beta1.MachineFinalizer) {
						return err
					}
					// The racing delete: the object goes, finalizer and all.
					gone := obj.DeepCopyObject().(client.Object)
					controllerutil.RemoveFinalizer(gone, machinev1beta1.MachineFinalizer)
					if err := c.Update(ctx, gone); err != nil {
						return err
					}
					return c.Delete(ctx, gone)
				},
			}).Build()
		a := &fakeActuator{}
		r := &Reconciler{Client: c, APIReader: c, Actuator: a, Recorder: record.NewFakeRecorder(20)}
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(m)}); err != nil {
			t.Fatalf("vanish %v: %v", vanish, err)
		}
		launched := false
		for _, call := range a.calls {
			launched = launched || call == "Create"
		}
		if launched == vanish {
			t.Errorf("vanish %v: actuator calls %v", vanish, a.calls)
		}
	}
}
