package manager

import (
	"context"
	"net/http"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/machina-dev/machina/internal/requeue"
)

// MappingPatience is how long a REST mapping waits for an API server that does not answer
// discovery before the error reaches the caller.
const MappingPatience = 2 * time.Minute

// patientMapper is controller-runtime's lazy discovery RESTMapper, but a lookup the API server
// could not answer (unreachable, restarting, timing out) is tried again for up to patience
// instead of failing at once. Setting up the controllers looks kinds up (an index, a
// namespaced check); a manager that starts while the API server is away — a restart, an etcd
// outage, a network cut, exactly when the other replica may have died too — otherwise exits,
// and its pod backs off in CrashLoopBackOff for minutes after the API server is back.
//
// A kind the API server does not serve (no match) is answered at once — unless an Established
// CustomResourceDefinition says it is served: a restarted API server lists a CRD's group in
// discovery a moment before it serves the group's resources, and a "no match" in that moment
// would stop the manager's setup, or leave a platform's kinds unwatched (see
// synccommon.InstalledKinds), until the next restart.
type patientMapper struct {
	meta.RESTMapper
	patience time.Duration
	// crdServes reports whether an Established CRD serves the kind or resource; nil: never.
	crdServes func(crdMatch) (bool, error)
}

func newPatientMapper(cfg *rest.Config, hc *http.Client) (meta.RESTMapper, error) {
	m, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return nil, err
	}
	crds, err := apiextensionsclient.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	return patientMapper{RESTMapper: m, patience: MappingPatience, crdServes: listedCRDServes(crds)}, nil
}

// patiently calls lookup until it succeeds, answers a "no match" no CRD contradicts, or
// patience runs out, and returns its last answer.
func patiently[T any](p patientMapper, match crdMatch, lookup func() (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(context.Background(), p.patience)
	defer cancel()
	var v T
	var err error
	logged := false
	_ = requeue.Patient().DelayFunc().Until(ctx, true, true, func(context.Context) (bool, error) {
		v, err = lookup()
		if err == nil || p.final(err, match) {
			return true, nil
		}
		if !logged {
			ctrl.Log.WithName("restmapper").Info("discovery did not answer, or does not yet list a kind an Established CRD serves; trying again",
				"lookup", match.String(), "error", err.Error(), "for", p.patience)
			logged = true
		}
		return false, nil
	})
	return v, err
}

// final reports whether err is an answer rather than a failure to get one: a "no match" for a
// kind no Established CRD serves. A CRD that cannot be read leaves it open.
func (p patientMapper) final(err error, match crdMatch) bool {
	if !meta.IsNoMatchError(err) {
		return false
	}
	if p.crdServes == nil {
		return true
	}
	served, cerr := p.crdServes(match)
	if apierrors.IsForbidden(cerr) {
		return true
	}
	return cerr == nil && !served
}

func (p patientMapper) KindFor(r schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return patiently(p, resourceMatch(r), func() (schema.GroupVersionKind, error) { return p.RESTMapper.KindFor(r) })
}

func (p patientMapper) KindsFor(r schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return patiently(p, resourceMatch(r), func() ([]schema.GroupVersionKind, error) { return p.RESTMapper.KindsFor(r) })
}

func (p patientMapper) ResourceFor(r schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return patiently(p, resourceMatch(r), func() (schema.GroupVersionResource, error) { return p.RESTMapper.ResourceFor(r) })
}

func (p patientMapper) ResourcesFor(r schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return patiently(p, resourceMatch(r), func() ([]schema.GroupVersionResource, error) { return p.RESTMapper.ResourcesFor(r) })
}

func (p patientMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return patiently(p, kindMatch(gk, versions), func() (*meta.RESTMapping, error) { return p.RESTMapper.RESTMapping(gk, versions...) })
}

func (p patientMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return patiently(p, kindMatch(gk, versions), func() ([]*meta.RESTMapping, error) { return p.RESTMapper.RESTMappings(gk, versions...) })
}
