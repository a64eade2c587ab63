// Package authorityhook is the admission webhook for the authority rules that need a look at
// another object, which CEL admission policies cannot do:
//
//   - a Machine API Machine, MachineSet or MachineHealthCheck created with authority MachineAPI
//     while a Cluster API resource of the same name exists is refused (the Cluster API one
//     would be overwritten by the sync);
//   - a Cluster API Machine, MachineSet or MachineHealthCheck whose Machine API mirror exists
//     and is not ClusterAPI-authoritative may only be created paused (otherwise both
//     controller families would reconcile the same machine).
//
// Requests from machina's own identity are not sent to the webhook (matchConditions), so the
// sync and MachineSet controllers' creates cost nothing. The manager serves the webhook and
// registers its ValidatingWebhookConfiguration itself (see serve.go).
package authorityhook

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/machina-dev/machina/internal/authority"
)

// Namespaces pairs the Machine API namespace with the Cluster API one.
type Namespaces struct {
	MachineAPI, ClusterAPI string
}

// Rules validates creates; Reader should read the apiserver directly (not a cache), so a
// resource created a moment ago is seen.
type Rules struct {
	Reader     client.Reader
	Namespaces Namespaces
}

var kinds = map[string]bool{"Machine": true, "MachineSet": true, "MachineHealthCheck": true}

// MachineAPICreate refuses a MachineAPI-authoritative Machine API resource whose name a
// Cluster API resource already uses.
func (r *Rules) MachineAPICreate(ctx context.Context, req admission.Request) admission.Response {
	kind := req.Kind.Kind
	if !kinds[kind] || req.Namespace != r.Namespaces.MachineAPI {
		return admission.Allowed("")
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(req.Object.Raw); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	requested, field := "", "spec.authoritativeAPI"
	if kind == "MachineHealthCheck" {
		requested, field = obj.GetAnnotations()[authority.MHCAuthoritativeAPIAnnotation], "metadata.annotations["+authority.MHCAuthoritativeAPIAnnotation+"]"
	} else {
		requested, _, _ = unstructured.NestedString(obj.Object, "spec", "authoritativeAPI")
	}
	if requested != string(machinev1beta1.MachineAuthorityMachineAPI) {
		return admission.Allowed("")
	}
	name := req.Name
	if name == "" {
		name = obj.GetName()
	}
	exists, err := r.exists(ctx, clusterv1.GroupVersion.WithKind(kind), r.Namespaces.ClusterAPI, name)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if !exists {
		return admission.Allowed("")
	}
	// spec.authoritativeAPI is defaulted to MachineAPI before admission, so only the
	// MachineHealthCheck's annotation can be left out to the same effect as ClusterAPI.
	orUnset := ""
	if kind == "MachineHealthCheck" {
		orUnset = " (or leave it unset)"
	}
	return admission.Denied(fmt.Sprintf(
		"%s: MachineAPI: a Cluster API %s %s/%s already exists and would be overwritten by the sync; "+
			"set %s to ClusterAPI%s to adopt the Cluster API resource, or delete that resource first",
		field, kind, r.Namespaces.ClusterAPI, name, field, orUnset))
}

// ClusterAPICreate refuses an unpaused Cluster API resource whose Machine API mirror is not
// ClusterAPI-authoritative. The webhook configuration only sends unpaused creates.
func (r *Rules) ClusterAPICreate(ctx context.Context, req admission.Request) admission.Response {
	kind := req.Kind.Kind
	if !kinds[kind] || req.Namespace != r.Namespaces.ClusterAPI {
		return admission.Allowed("")
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(req.Object.Raw); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if _, paused := obj.GetAnnotations()[clusterv1.PausedAnnotation]; paused {
		return admission.Allowed("")
	}
	name := req.Name
	if name == "" {
		name = obj.GetName()
	}
	mirror := &unstructured.Unstructured{}
	mirror.SetGroupVersionKind(machinev1beta1.GroupVersion.WithKind(kind))
	if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: r.Namespaces.MachineAPI, Name: name}, mirror); err != nil {
		if apierrors.IsNotFound(err) {
			return admission.Allowed("")
		}
		return admission.Errored(http.StatusInternalServerError, err)
	}
	authority := mirrorAuthority(kind, mirror)
	if authority == string(machinev1beta1.MachineAuthorityClusterAPI) {
		return admission.Allowed("")
	}
	if authority == "" {
		authority = "not decided yet"
	}
	return admission.Denied(fmt.Sprintf(
		"metadata.annotations: the Machine API %s %s/%s mirrors this resource and its authority is %s, so the Cluster API copy must be created "+
			"with the %s annotation; to let the Cluster API own it, run 'machina migrate %s/%s --to ClusterAPI' instead",
		kind, r.Namespaces.MachineAPI, name, authority, clusterv1.PausedAnnotation, strings.ToLower(kind), name))
}

// mirrorAuthority is the Machine API copy's current authority (status, else the request).
func mirrorAuthority(kind string, o *unstructured.Unstructured) string {
	if kind == "MachineHealthCheck" {
		a := o.GetAnnotations()
		if a[authority.MHCStatusAuthoritativeAPIAnnotation] != "" {
			return a[authority.MHCStatusAuthoritativeAPIAnnotation]
		}
		if a[authority.MHCAuthoritativeAPIAnnotation] != "" {
			return a[authority.MHCAuthoritativeAPIAnnotation]
		}
		return string(machinev1beta1.MachineAuthorityMachineAPI)
	}
	if s, _, _ := unstructured.NestedString(o.Object, "status", "authoritativeAPI"); s != "" {
		return s
	}
	s, _, _ := unstructured.NestedString(o.Object, "spec", "authoritativeAPI")
	return s
}

func (r *Rules) exists(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) (bool, error) {
	o := &unstructured.Unstructured{}
	o.SetGroupVersionKind(gvk)
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("reading %s %s/%s: %w", gvk.Kind, ns, name, err)
}
