package authority

import (
	"context"
	"fmt"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/requeue"
)

// authorityFields are the Machine API fields the sync and migration write on Machines and
// MachineSets. OpenShift's CRDs declare them only under the MachineAPIMigration feature gate;
// without them the API server prunes every write of them and the controllers would write
// them again forever.
var authorityFields = []string{
	"spec.authoritativeAPI", "status.authoritativeAPI", "status.synchronizedGeneration", "status.synchronizedAPI",
}

// authorityCRDs are the CRDs whose schemas must carry authorityFields.
var authorityCRDs = []string{"machines.machine.openshift.io", "machinesets.machine.openshift.io"}

const crdDocs = `docs/install.md "Install on OpenShift"`

// The right to read the CRDs is marked (+kubebuilder:rbac) in the groups that run the check,
// sync and migration: the manager's role is generated from the controllers' paths only.

// CheckMachineAPICRDs returns an error when the installed Machine or MachineSet CRD is missing
// or its v1beta1 schema lacks one of the authority fields, so that the sync and migration
// refuse to start instead of looping on writes the API server drops. r must read the API
// server itself: the manager's cache keeps CRDs without their schemas (internal/cachetrim).
func CheckMachineAPICRDs(ctx context.Context, r client.Reader) error {
	// It runs in a group's Setup, which has no deadline of its own: an API server that stays
	// unreachable must fail the start, not hang it; one restarting (a replica is often
	// restarted exactly then) must not.
	ctx, cancel := context.WithTimeout(ctx, crdReadPatience)
	defer cancel()
	var lacks []string
	for _, name := range authorityCRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := getPatiently(ctx, r, name, crd); apierrors.IsNotFound(err) {
			return fmt.Errorf("CRD %s is not installed: the sync and migration need the Machine API CRDs (%s)", name, crdDocs)
		} else if err != nil {
			return fmt.Errorf("reading CRD %s: %w", name, err)
		}
		if missing := missingFields(crd); len(missing) > 0 {
			lacks = append(lacks, fmt.Sprintf("CRD %s lacks %s", name, strings.Join(missing, ", ")))
		}
	}
	if len(lacks) == 0 {
		return nil
	}
	return fmt.Errorf("%s: the sync and migration need the Machine API migration fields, which OpenShift's CRDs "+
		"declare under the MachineAPIMigration feature gate (feature set TechPreviewNoUpgrade, DevPreviewNoUpgrade "+
		"or CustomNoUpgrade; %s)", strings.Join(lacks, "; "), crdDocs)
}

// crdReadPatience bounds how long the check waits for an API server that does not answer;
// the manager's REST mapper waits as long (internal/manager, MappingPatience).
const crdReadPatience = 2 * time.Minute

// getPatiently reads the CRD named name, trying again while the API server does not answer
// (a refused or reset connection, a timeout, a 5xx) until ctx ends, and returns the last
// read's error. An answer — found, not found, forbidden — is returned at once.
func getPatiently(ctx context.Context, r client.Reader, name string, crd *apiextensionsv1.CustomResourceDefinition) error {
	var err error
	_ = requeue.Patient().DelayFunc().Until(ctx, true, true, func(ctx context.Context) (bool, error) {
		err = r.Get(ctx, client.ObjectKey{Name: name}, crd)
		return err == nil || apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err), nil
	})
	return err
}

// missingFields lists the authority fields the CRD's served v1beta1 schema does not declare
// (all of them when it serves no v1beta1).
func missingFields(crd *apiextensionsv1.CustomResourceDefinition) []string {
	var root *apiextensionsv1.JSONSchemaProps
	for _, v := range crd.Spec.Versions {
		if v.Name == "v1beta1" && v.Served && v.Schema != nil {
			root = v.Schema.OpenAPIV3Schema
		}
	}
	var missing []string
	for _, path := range authorityFields {
		if !declares(root, strings.Split(path, ".")) {
			missing = append(missing, path)
		}
	}
	return missing
}

// declares reports whether s has the nested property path.
func declares(s *apiextensionsv1.JSONSchemaProps, path []string) bool {
	for _, p := range path {
		if s == nil {
			return false
		}
		next, ok := s.Properties[p]
		if !ok {
			return false
		}
		s = &next
	}
	return true
}
