package manager

import (
	"errors"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// flakyMapper fails its first `failures` lookups with err, then maps every kind.
type flakyMapper struct {
	meta.RESTMapper
	failures, calls int
	err             error
}

func (f *flakyMapper) RESTMapping(gk schema.GroupKind, _ ...string) (*meta.RESTMapping, error) {
	f.calls++
	if f.calls <= f.failures {
		return nil, f.err
	}
	return &meta.RESTMapping{GroupVersionKind: gk.WithVersion("v1")}, nil
}

// A lookup the API server could not answer is tried again until it is answered; a kind the
// API server does not serve is reported at once; patience bounds the wait.
func TestPatientMapper(t *testing.T) {
	gk := schema.GroupKind{Group: "example.com", Kind: "Widget"}
	away := errors.New(`failed to get restmapping: failed to get server groups: dial tcp: connect: connection refused`)

	f := &flakyMapper{failures: 3, err: away}
	p := patientMapper{RESTMapper: f, patience: time.Minute}
	if m, err := p.RESTMapping(gk); err != nil || m.GroupVersionKind.Kind != "Widget" || f.calls != 4 {
		t.Fatalf("after 3 failures: %v, %v after %d calls; want the mapping after 4", m, err, f.calls)
	}

	f = &flakyMapper{failures: 100, err: &meta.NoKindMatchError{GroupKind: gk}}
	p = patientMapper{RESTMapper: f, patience: time.Minute}
	if _, err := p.RESTMapping(gk); !meta.IsNoMatchError(err) || f.calls != 1 {
		t.Fatalf("kind not served: %v after %d calls; want the no-match error after 1", err, f.calls)
	}

	f = &flakyMapper{failures: 100, err: away}
	p = patientMapper{RESTMapper: f, patience: 500 * time.Millisecond}
	start := time.Now()
	if _, err := p.RESTMapping(gk); !errors.Is(err, away) {
		t.Fatalf("API server away past patience: %v; want its error", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("gave up after %s with a patience of 500ms", d)
	}
}

// A "no match" for a kind an Established CRD serves is what a restarted API server answers
// for a moment (discovery lists the group before its resources): it is tried again. A "no
// match" no CRD contradicts, or one the CRDs cannot be read to check because of RBAC, is final;
// CRDs that cannot be read because the API server is away leave it open.
func TestPatientMapperNoMatchWithCRD(t *testing.T) {
	gk := schema.GroupKind{Group: "example.com", Kind: "Widget"}
	noMatch := &meta.NoKindMatchError{GroupKind: gk}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, "", errors.New("no"))
	away := errors.New("connection refused")
	for _, tc := range []struct {
		name      string
		served    []bool
		errs      []error
		wantCalls int
		wantErr   bool
	}{
		{name: "CRD serves it", served: []bool{true, true, true}, wantCalls: 4},
		{name: "no CRD", served: []bool{false}, wantCalls: 1, wantErr: true},
		{name: "CRDs forbidden", errs: []error{forbidden}, served: []bool{false}, wantCalls: 1, wantErr: true},
		{name: "CRDs unreadable, then served", errs: []error{away, away}, served: []bool{false, false, true}, wantCalls: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &flakyMapper{failures: 3, err: noMatch}
			asked := 0
			p := patientMapper{RESTMapper: f, patience: time.Minute, crdServes: func(m crdMatch) (bool, error) {
				if m.group != gk.Group || m.kind != gk.Kind {
					t.Errorf("asked about %v", m)
				}
				i := min(asked, len(tc.served)-1)
				asked++
				var err error
				if i < len(tc.errs) {
					err = tc.errs[i]
				}
				return tc.served[i], err
			}}
			_, err := p.RESTMapping(gk, "v1")
			if (err != nil) != tc.wantErr || f.calls != tc.wantCalls {
				t.Fatalf("%v after %d lookups; want error %v after %d", err, f.calls, tc.wantErr, tc.wantCalls)
			}
		})
	}
}

// servedBy matches a CRD by group and kind or resource, Established, serving a version asked for.
func TestCRDMatchServedBy(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Widget", Plural: "widgets", Singular: "widget"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true}, {Name: "v1alpha1", Served: false},
			},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{Conditions: []apiextensionsv1.CustomResourceDefinitionCondition{
			{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue},
		}},
	}
	gk := schema.GroupKind{Group: "example.com", Kind: "Widget"}
	for _, tc := range []struct {
		m    crdMatch
		want bool
	}{
		{kindMatch(gk, nil), true},
		{kindMatch(gk, []string{""}), true},
		{kindMatch(gk, []string{"v1"}), true},
		{kindMatch(gk, []string{"v1alpha1"}), false},
		{kindMatch(gk, []string{"v2"}), false},
		{kindMatch(schema.GroupKind{Group: "example.com", Kind: "Gadget"}, nil), false},
		{kindMatch(schema.GroupKind{Group: "example.org", Kind: "Widget"}, nil), false},
		{resourceMatch(schema.GroupVersionResource{Group: "example.com", Resource: "widgets"}), true},
		{resourceMatch(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widget"}), true},
		{resourceMatch(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}), false},
	} {
		if got := tc.m.servedBy(crd); got != tc.want {
			t.Errorf("%s: served %v, want %v", tc.m, got, tc.want)
		}
	}
	crd.Status.Conditions[0].Status = apiextensionsv1.ConditionFalse
	if kindMatch(gk, nil).servedBy(crd) {
		t.Error("a CRD not Established serves its kind")
	}
}
