package userdata

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/machina-dev/machina/internal/scheme"
)

// A user data Secret another worker created after this one's cache was filled (the cache
// still says NotFound, the create says AlreadyExists) is not an error: the caller's pass goes
// on. Other errors still are.
func TestEnsureUserDataCreatedConcurrently(t *testing.T) {
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "mapi", Name: "worker-user-data"}, Data: map[string][]byte{"userData": []byte("x")}}
	staleCache := func(createErr error) client.Client {
		return fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(src).WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if key.Namespace == "capi" {
					return apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, key.Name)
				}
				return c.Get(ctx, key, obj, opts...)
			},
			Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error { return createErr },
		}).Build()
	}
	gr := schema.GroupResource{Resource: "secrets"}
	if err := Ensure(context.Background(), staleCache(apierrors.NewAlreadyExists(gr, "worker-user-data")), "mapi", "capi",
		ptr.To("worker-user-data"), "c"); err != nil {
		t.Errorf("created concurrently by another worker: %v, want nil", err)
	}
	if err := Ensure(context.Background(), staleCache(apierrors.NewForbidden(gr, "worker-user-data", nil)), "mapi", "capi",
		ptr.To("worker-user-data"), "c"); !apierrors.IsForbidden(err) {
		t.Errorf("forbidden create: %v, want the error", err)
	}
}

// The bootstrap data Secret of Ignition user data says format ignition; other user data
// gets no format (the contract's default, cloud-config), and a format set by someone else
// stays.
func TestEnsureUserDataFormat(t *testing.T) {
	ignition := []byte(`{"ignition":{"version":"3.2.0"},"passwd":{}}`)
	for _, tc := range []struct {
		name     string
		userData []byte
		existing map[string][]byte
		want     string
	}{
		{"ignition", ignition, nil, "ignition"},
		{"cloud-config", []byte("#cloud-config\nruncmd: []\n"), nil, ""},
		{"JSON without ignition", []byte(`{"version":"3.2.0"}`), nil, ""},
		{"format kept", ignition, map[string][]byte{"value": []byte("old"), "format": []byte("cloud-config")}, "cloud-config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []client.Object{&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "mapi", Name: "worker-user-data"},
				Data: map[string][]byte{"userData": tc.userData}}}
			if tc.existing != nil {
				objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "capi", Name: "worker-user-data"}, Data: tc.existing})
			}
			c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).Build()
			if err := Ensure(context.Background(), c, "mapi", "capi", ptr.To("worker-user-data"), "c"); err != nil {
				t.Fatal(err)
			}
			got := &corev1.Secret{}
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: "capi", Name: "worker-user-data"}, got); err != nil {
				t.Fatal(err)
			}
			if f := string(got.Data["format"]); f != tc.want {
				t.Errorf("format %q, want %q", f, tc.want)
			}
			if string(got.Data["value"]) != string(tc.userData) {
				t.Errorf("value %q, want the user data", got.Data["value"])
			}
		})
	}
}
