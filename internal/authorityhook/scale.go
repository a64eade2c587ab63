package authorityhook

import (
	"context"
	"fmt"
	"net/http"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/machina-dev/machina/internal/gate"
)

// AutoscalerUser is the identity OpenShift's cluster autoscaler runs as; it may scale a mirror
// MachineSet of either API (the sync carries its change over to the authoritative copy), as the
// machina-mapi-mirror-writes and machina-capi-mirror-writes policies let it change spec.replicas.
const AutoscalerUser = "system:serviceaccount:openshift-machine-api:cluster-autoscaler"

// Paths of the scale-subresource checks.
const (
	MachineAPIScalePath = "/validate-machine-api-scale"
	ClusterAPIScalePath = "/validate-cluster-api-scale"
)

// A request to a MachineSet's scale subresource carries only a Scale, so the CEL policies
// cannot tell a mirror from an authoritative copy; these checks read the MachineSet.

// MachineAPIScale refuses scaling a Machine API MachineSet whose authority is the Cluster
// API, or that is Migrating back from it, except by the cluster autoscaler: its replicas are
// the sync's to set. Migrating from the Machine API, it is still the side the sync copies from
// (status.synchronizedAPI), so a scale reaches the Cluster API copy and the handover waits for
// it, as the machina-mapi-mirror-writes policy lets a spec edit do.
func (r *Rules) MachineAPIScale(ctx context.Context, req admission.Request) admission.Response {
	if req.Namespace != r.Namespaces.MachineAPI || req.UserInfo.Username == AutoscalerUser {
		return admission.Allowed("")
	}
	ms := &machinev1beta1.MachineSet{}
	if resp, ok := r.getScaled(ctx, req, ms); !ok {
		return resp
	}
	if mirror(ms.Status.AuthoritativeAPI, ms.Status.SynchronizedAPI) {
		return admission.Denied(fmt.Sprintf("spec.replicas: Forbidden: MachineSet %s is a mirror: the Cluster API is authoritative (%s); "+
			"scale the cluster.x-k8s.io copy instead, or set spec.authoritativeAPI to MachineAPI to move it back", ms.Name, ms.Status.AuthoritativeAPI))
	}
	return admission.Allowed("")
}

// mirror reports whether a Machine API copy with this authority is a mirror: the Cluster API
// owns it, or it is Migrating with the Cluster API as the side last synchronised from.
func mirror(authority machinev1beta1.MachineAuthority, synced machinev1beta1.SynchronizedAPI) bool {
	return authority == machinev1beta1.MachineAuthorityClusterAPI ||
		authority == machinev1beta1.MachineAuthorityMigrating && synced == machinev1beta1.ClusterAPISynchronized
}

// ClusterAPIScale refuses scaling the paused Cluster API mirror of an authoritative Machine
// API MachineSet, except by the cluster autoscaler.
func (r *Rules) ClusterAPIScale(ctx context.Context, req admission.Request) admission.Response {
	if req.Namespace != r.Namespaces.ClusterAPI || req.UserInfo.Username == AutoscalerUser {
		return admission.Allowed("")
	}
	ms := &clusterv1.MachineSet{}
	if resp, ok := r.getScaled(ctx, req, ms); !ok {
		return resp
	}
	if !gate.PausedAsMirror(ms) {
		return admission.Allowed("")
	}
	return admission.Denied(fmt.Sprintf("spec.replicas: Forbidden: MachineSet %s is a paused mirror of an authoritative Machine API resource; "+
		"scale the machine.openshift.io copy, or migrate it with spec.authoritativeAPI: ClusterAPI there", ms.Name))
}

// getScaled reads the MachineSet a scale request is for; ok is false when the answer is
// already known (gone: nothing to guard; unreadable: an error).
func (r *Rules) getScaled(ctx context.Context, req admission.Request, ms client.Object) (admission.Response, bool) {
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: req.Name}, ms)
	switch {
	case err == nil:
		return admission.Response{}, true
	case apierrors.IsNotFound(err):
		return admission.Allowed(""), false
	}
	return admission.Errored(http.StatusInternalServerError, fmt.Errorf("reading MachineSet %s/%s: %w", req.Namespace, req.Name, err)), false
}
