package authority

import (
	"maps"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The openshift/api MachineHealthCheck has no authoritativeAPI fields, so machina carries its
// authority in annotations: the request (like spec.authoritativeAPI) and the current
// authority (like status.authoritativeAPI, written by the sync and migration controllers).
const (
	MHCAuthoritativeAPIAnnotation       = "machina.dev/authoritative-api"
	MHCStatusAuthoritativeAPIAnnotation = "machina.dev/status-authoritative-api"
	// MHCSynchronizedAPIAnnotation is like status.synchronizedAPI: the last stable authority,
	// which is where a migration started from while the current authority is Migrating.
	MHCSynchronizedAPIAnnotation = "machina.dev/synchronized-api"
	// MHCSynchronizedGenerationAnnotation is like status.synchronizedGeneration: the
	// generation of the authoritative copy the sync controller last made the mirror equal to.
	MHCSynchronizedGenerationAnnotation = "machina.dev/synchronized-generation"
)

// SetMHCPaused makes a Machine API MachineHealthCheck carry the cluster.x-k8s.io/paused
// annotation while its authority (the MHCStatusAuthoritativeAPIAnnotation value) is not
// MachineAPI, and drop it when it is: machine-api-operator's MachineHealthCheck controller
// knows nothing of machina's authority annotations and honours only that one, so it would
// otherwise go on remediating beside the Cluster API's check. It reports whether the
// annotations changed.
func SetMHCPaused(o client.Object, authority machinev1beta1.MachineAuthority) bool {
	a := o.GetAnnotations()
	_, has := a[clusterv1.PausedAnnotation]
	want := authority != machinev1beta1.MachineAuthorityMachineAPI
	if has == want {
		return false
	}
	a = maps.Clone(a)
	if a == nil {
		a = map[string]string{}
	}
	if want {
		a[clusterv1.PausedAnnotation] = ""
	} else {
		delete(a, clusterv1.PausedAnnotation)
	}
	o.SetAnnotations(a)
	return true
}
