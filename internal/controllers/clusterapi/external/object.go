package external

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/patch"
)

// Object is a provider object and the contract its CRD follows.
type Object struct {
	*unstructured.Unstructured
	Contract Contract
}

// Provisioned reads the contract's "infrastructure is provisioned" / "bootstrap data is
// ready" flag: status.initialization.<v1beta2Field> under the v1beta2 contract, status.ready
// under v1beta1.
func (o *Object) Provisioned(v1beta2Field string) bool {
	var b bool
	if o.Contract == ContractV1Beta1 {
		b, _, _ = unstructured.NestedBool(o.Object, "status", "ready")
	} else {
		b, _, _ = unstructured.NestedBool(o.Object, "status", "initialization", v1beta2Field)
	}
	return b
}

// String reads a string field (empty when absent or not a string).
func (o *Object) String(path ...string) string {
	s, _, _ := unstructured.NestedString(o.Object, path...)
	return s
}

// ProviderID is spec.providerID.
func (o *Object) ProviderID() string { return o.String("spec", "providerID") }

// FailureDomain is status.failureDomain, or spec.failureDomain for v1beta1 providers that
// still report it there.
func (o *Object) FailureDomain() string {
	if fd := o.String("status", "failureDomain"); fd != "" {
		return fd
	}
	return o.String("spec", "failureDomain")
}

// Addresses is status.addresses.
func (o *Object) Addresses() clusterv1.MachineAddresses {
	list, _, _ := unstructured.NestedSlice(o.Object, "status", "addresses")
	var out clusterv1.MachineAddresses
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		t, _ := m["type"].(string)
		a, _ := m["address"].(string)
		if t != "" && a != "" {
			out = append(out, clusterv1.MachineAddress{Type: clusterv1.MachineAddressType(t), Address: a})
		}
	}
	return out
}

// Failure returns status.failureReason and status.failureMessage: terminal errors of
// v1beta1-contract providers (the v1beta2 contract has none).
func (o *Object) Failure() (reason, message string) {
	if o.Contract != ContractV1Beta1 {
		return "", ""
	}
	return o.String("status", "failureReason"), o.String("status", "failureMessage")
}

// Condition returns the condition of type t. v1beta2-contract providers report
// metav1.Conditions in status.conditions; v1beta1-contract providers may report them in
// status.v1beta2.conditions, else their old-style conditions in status.conditions (same
// type/status/reason/message fields).
func (o *Object) Condition(t string) *metav1.Condition {
	paths := [][]string{{"status", "conditions"}}
	if o.Contract == ContractV1Beta1 {
		paths = [][]string{{"status", "v1beta2", "conditions"}, {"status", "conditions"}}
	}
	for _, p := range paths {
		list, found, _ := unstructured.NestedSlice(o.Object, p...)
		if !found {
			continue
		}
		for _, item := range list {
			m, ok := item.(map[string]any)
			if !ok || m["type"] != t {
				continue
			}
			c := &metav1.Condition{Type: t}
			s, _ := m["status"].(string)
			c.Status = metav1.ConditionStatus(s)
			c.Reason, _ = m["reason"].(string)
			c.Message, _ = m["message"].(string)
			return c
		}
		return nil
	}
	return nil
}

// EnsureOwned makes owner an owner of o (its controller when controller is set and o has no
// other controller) and sets the cluster-name label; it patches o only when something changed.
func EnsureOwned(ctx context.Context, c client.Client, o *Object, owner client.Object, controller bool, clusterName string) error {
	gvk, err := c.GroupVersionKindFor(owner)
	if err != nil {
		return err
	}
	if _, err := patch.Locked(ctx, c, o.Unstructured, func() bool {
		added := addOwner(o, owner, gvk.GroupVersion().String(), gvk.Kind, controller)
		return setClusterLabel(o, clusterName) || added
	}); err != nil {
		return fmt.Errorf("setting owner and cluster label on %s %s: %w", o.GetKind(), o.GetName(), err)
	}
	return nil
}

// addOwner adds an owner reference to owner unless o has one; it is o's controller when
// controller is set and o has no other controller. It reports whether it added one.
func addOwner(o *Object, owner client.Object, apiVersion, kind string, controller bool) bool {
	refs := o.GetOwnerReferences()
	hasController := false
	for _, r := range refs {
		if r.UID == owner.GetUID() {
			return false
		}
		if r.Controller != nil && *r.Controller {
			hasController = true
		}
	}
	ref := metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: owner.GetName(), UID: owner.GetUID()}
	if controller && !hasController {
		t := true
		ref.Controller, ref.BlockOwnerDeletion = &t, &t
	}
	o.SetOwnerReferences(append(refs, ref))
	return true
}

// setClusterLabel sets the cluster-name label (unless clusterName is empty), reporting
// whether it changed.
func setClusterLabel(o *Object, clusterName string) bool {
	labels := o.GetLabels()
	if clusterName == "" || labels[clusterv1.ClusterNameLabel] == clusterName {
		return false
	}
	if labels == nil {
		labels = map[string]string{}
	}
	labels[clusterv1.ClusterNameLabel] = clusterName
	o.SetLabels(labels)
	return true
}
