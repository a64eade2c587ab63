package manager

import (
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// MappingPatience is how long a REST mapping waits for an API server that does not answer
// discovery before the error reaches the caller.
const MappingPatience = 2 * time.Minute

// patientMapper is controller-runtime's lazy discovery RESTMapper, but a lookup the API server
// could not answer (unreachable, restarting, timing out) is tried again for up to patience
// instead of failing at once. Setting up the controllers looks kinds up (an index, a
// namespaced check); a manager that starts while the API server is away — a restart, an etcd
// outage, a network cut, exactly when the other replica may have died too — otherwise exits,
// and its pod backs off in CrashLoopBackOff for minutes after the API server is back. A kind
// the API server does not serve (no match) is answered at once.
type patientMapper struct {
	meta.RESTMapper
	patience time.Duration
}

func newPatientMapper(cfg *rest.Config, hc *http.Client) (meta.RESTMapper, error) {
	m, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return nil, err
	}
	return patientMapper{RESTMapper: m, patience: MappingPatience}, nil
}

// patiently calls lookup until it succeeds, answers "no match", or patience runs out.
func patiently[T any](p patientMapper, what string, lookup func() (T, error)) (T, error) {
	deadline := time.Now().Add(p.patience)
	delay := 100 * time.Millisecond
	for logged := false; ; {
		v, err := lookup()
		if err == nil || meta.IsNoMatchError(err) || !time.Now().Add(delay).Before(deadline) {
			return v, err
		}
		if !logged {
			ctrl.Log.WithName("restmapper").Info("the API server did not answer discovery; trying again",
				"lookup", what, "error", err.Error(), "for", p.patience)
			logged = true
		}
		time.Sleep(delay)
		delay = min(2*delay, 5*time.Second)
	}
}

func (p patientMapper) KindFor(r schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return patiently(p, r.String(), func() (schema.GroupVersionKind, error) { return p.RESTMapper.KindFor(r) })
}

func (p patientMapper) KindsFor(r schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return patiently(p, r.String(), func() ([]schema.GroupVersionKind, error) { return p.RESTMapper.KindsFor(r) })
}

func (p patientMapper) ResourceFor(r schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return patiently(p, r.String(), func() (schema.GroupVersionResource, error) { return p.RESTMapper.ResourceFor(r) })
}

func (p patientMapper) ResourcesFor(r schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return patiently(p, r.String(), func() ([]schema.GroupVersionResource, error) { return p.RESTMapper.ResourcesFor(r) })
}

func (p patientMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return patiently(p, gk.String(), func() (*meta.RESTMapping, error) { return p.RESTMapper.RESTMapping(gk, versions...) })
}

func (p patientMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return patiently(p, gk.String(), func() ([]*meta.RESTMapping, error) { return p.RESTMapper.RESTMappings(gk, versions...) })
}
