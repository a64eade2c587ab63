package testenv

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A Hold makes the kube-apiserver refuse one kind of write, as an admission outage would: a
// ValidatingAdmissionPolicy the test installs denies the writes its expression matches. The
// controller under test then stops just before that write, for as long as the test needs, and
// goes on once the hold is lifted; no code under test knows about it.
type Hold struct {
	// What names the refused write in messages.
	What string
	// Group and Resource (with "/status" for the status subresource) the write goes to.
	Group, Resource string
	// Deny is a CEL expression over object (and oldObject for updates): true refuses the write.
	Deny string
	// Operations are the refused operations; UPDATE when empty.
	Operations []admissionregistrationv1.OperationType
}

var holdSeq atomic.Int32

// holdNamespace is where the canary ConfigMaps are tried (dry run: nothing is stored).
const holdNamespace = "default"

// Apply installs the hold and returns once the kube-apiserver enforces it, and a function
// that lifts it and returns once it no longer does. A canary in the same policy tells when
// the policy is in force: a dry-run create of the canary ConfigMap is refused exactly then.
func (h Hold) Apply(e *Env) (lift func()) {
	e.T.Helper()
	ctx := context.Background()
	id := fmt.Sprintf("test-hold-%d", holdSeq.Add(1))
	canary := id + "-canary"
	ops := h.Operations
	if len(ops) == 0 {
		ops = []admissionregistrationv1.OperationType{admissionregistrationv1.Update}
	}
	fail := admissionregistrationv1.Fail
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: id},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{
				{RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
				{RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: ops,
					Rule: admissionregistrationv1.Rule{APIGroups: []string{h.Group}, APIVersions: []string{"*"}, Resources: []string{h.Resource}}}},
			}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("request.resource.resource == 'configmaps' ? object.metadata.name != %q : !(%s)", canary, h.Deny),
				Message:    "held by the test: " + h.What,
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: id},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: id,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	if err := e.Client.Create(ctx, policy); err != nil {
		e.T.Fatalf("hold %s: %v", h.What, err)
	}
	if err := e.Client.Create(ctx, binding); err != nil {
		e.T.Fatalf("hold %s: %v", h.What, err)
	}
	enforced := func(ctx context.Context) (bool, error) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: canary, Namespace: holdNamespace}}
		err := e.Client.Create(ctx, cm, client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), "held by the test") {
			return true, nil
		}
		return false, err
	}
	e.Eventually(30*time.Second, "hold in force: "+h.What, func(ctx context.Context) (bool, string, error) {
		ok, err := enforced(ctx)
		return ok, fmt.Sprint(err), nil
	})
	return func() {
		e.T.Helper()
		_ = e.Client.Delete(ctx, binding)
		_ = e.Client.Delete(ctx, policy)
		e.Eventually(30*time.Second, "hold lifted: "+h.What, func(ctx context.Context) (bool, string, error) {
			ok, err := enforced(ctx)
			return !ok && err == nil, fmt.Sprint(err), nil
		})
	}
}
