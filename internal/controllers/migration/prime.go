package migration

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/machina-dev/machina/internal/patch"
)

// infraPrimer is a subject whose InfraMachine may need its contract status set before the
// Cluster API side is unpaused.
type infraPrimer interface {
	primeInfra(ctx context.Context, c client.Client) error
}

// primeInfra gives an InfraMachine the sync mirrored, which its provider has never
// reconciled and so reports nothing, the contract's provisioned flag before the Cluster API
// Machine is unpaused. Without it the Machine would read "not provisioned" and go Ready=False
// (and out of its MachineSet's available count) until the provider's first pass, seconds
// later on AWS. The flag comes from the side that was authoritative: the Machine API Machine
// has an instance (a providerID). Both contracts' fields are set, status.initialization.
// provisioned (v1beta2) and status.ready (v1beta1); the API server prunes the one the
// provider's schema lacks. The provider's first pass overwrites both with what it finds.
//
// A provider that has reported anything (either field present, true or false) is left as
// it is. Priming is a courtesy: when machina may not write the provider's status (its RBAC
// for the platform lacks <kind>/status), the handover goes on without it.
func (s *machineSubject) primeInfra(ctx context.Context, c client.Client) error {
	if s.infra == nil || ptr.Deref(s.mapi.Spec.ProviderID, "") == "" {
		return nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(s.infraGVK)
	if err := c.Get(ctx, client.ObjectKeyFromObject(s.infra), u); err != nil {
		return client.IgnoreNotFound(err)
	}
	if reportedProvisioned(u) {
		return nil
	}
	base := u.DeepCopy()
	if err := unstructured.SetNestedField(u.Object, true, "status", "initialization", "provisioned"); err != nil {
		return err
	}
	if err := unstructured.SetNestedField(u.Object, true, "status", "ready"); err != nil {
		return err
	}
	err := patch.StoreStatus(ctx, c, u, base)
	if err == nil {
		// The unpause that follows patches the metadata read before, with its lock.
		s.infra.SetResourceVersion(u.GetResourceVersion())
		return nil
	}
	if apierrors.IsForbidden(err) {
		logf.FromContext(ctx).Info("not priming the InfraMachine's status: no right to write it", "kind", u.GetKind(), "name", u.GetName(), "error", err.Error())
		return nil
	}
	return client.IgnoreNotFound(err)
}

// reportedProvisioned reports whether an InfraMachine's status has either contract field of
// "provisioned", whatever its value.
func reportedProvisioned(u *unstructured.Unstructured) bool {
	_, v1beta2, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "initialization", "provisioned")
	_, v1beta1, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "ready")
	return v1beta2 || v1beta1
}
