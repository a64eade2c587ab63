package manager

import (
	"errors"
	"testing"
	"time"

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
