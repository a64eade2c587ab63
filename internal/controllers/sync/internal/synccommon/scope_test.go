package synccommon

import (
	"context"
	"errors"
	"strings"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/scheme"
)

// A pass's changes to the Machine API copy go out in one metadata patch and one status patch
// at Finish, Synchronized and the synchronised generation included, and the events queued
// about them follow the write; a write refused for a stale copy sends no event and asks for
// the pass again.
func TestScopeFinish(t *testing.T) {
	for _, tc := range []struct {
		name       string
		refuse     bool
		wantWrites int
	}{
		{name: "stored", wantWrites: 2},
		{name: "conflict", refuse: true, wantWrites: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", Generation: 4,
				Finalizers: []string{authority.SyncFinalizer}}}
			writes := 0
			c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(m).WithStatusSubresource(m).
				WithInterceptorFuncs(interceptor.Funcs{
					Patch: func(ctx context.Context, c client.WithWatch, o client.Object, p client.Patch, opts ...client.PatchOption) error {
						return count(&writes, tc.refuse, func() error { return c.Patch(ctx, o, p, opts...) })
					},
					SubResourcePatch: func(ctx context.Context, c client.Client, sub string, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
						return count(&writes, tc.refuse, func() error { return c.SubResource(sub).Patch(ctx, o, p, opts...) })
					},
				}).Build()
			read := &machinev1beta1.Machine{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(m), read); err != nil {
				t.Fatal(err)
			}
			rec := record.NewFakeRecorder(10)
			s := NewScope(c, rec, read, &read.Status.Conditions, &read.Status.SynchronizedGeneration)
			read.Annotations = map[string]string{"machine.openshift.io/delete-machine": "x"}
			s.Eventf(corev1.EventTypeNormal, "AutoscalerDeleteMark", "carried")
			_ = s.Synchronized(authority.ConversionFailedReason, field.ErrorList{field.Invalid(field.NewPath("spec"), "x", "bad")}, nil, 0)
			_ = s.Synchronized(authority.SynchronizedReason, nil, nil, 4) // the last word wins
			var res ctrl.Result
			var err error
			s.Finish(context.Background(), &res, &err)
			if err != nil || (res.RequeueAfter > 0) != tc.refuse {
				t.Errorf("Finish: result %+v, error %v", res, err)
			}
			if writes != tc.wantWrites {
				t.Errorf("%d writes stored, want %d", writes, tc.wantWrites)
			}
			got := drain(rec)
			if tc.refuse && len(got) > 0 {
				t.Errorf("events for an unstored change: %q", got)
			}
			stored := &machinev1beta1.Machine{}
			_ = c.Get(context.Background(), client.ObjectKeyFromObject(m), stored)
			if !tc.refuse && (!mapicond.IsTrue(stored.Status.Conditions, authority.SynchronizedCondition) ||
				stored.Status.SynchronizedGeneration != 4 || stored.Annotations["machine.openshift.io/delete-machine"] != "x") {
				t.Errorf("stored %+v, annotations %v", stored.Status, stored.Annotations)
			}
			if !tc.refuse && (len(got) != 1 || !strings.HasPrefix(got[0], "Normal AutoscalerDeleteMark carried")) {
				// The conversion failure was superseded in the same pass: no warning for it.
				t.Errorf("events %q, want the delete mark's only", got)
			}
		})
	}
}

// count runs write, or refuses it as the API server refuses a stale copy, counting stored writes.
func count(n *int, refuse bool, write func() error) error {
	if refuse {
		return apierrors.NewConflict(schema.GroupResource{Group: "machine.openshift.io", Resource: "machines"}, "m", errors.New("stale"))
	}
	err := write()
	if err == nil {
		*n++
	}
	return err
}

func drain(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
