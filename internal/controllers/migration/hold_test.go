package migration_test

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

	"github.com/machina-dev/machina/internal/testenv"
)

// A hold makes the kube-apiserver refuse one kind of write, as an admission outage would:
// a ValidatingAdmissionPolicy the test installs denies the updates its expression matches.
// The handover then stops just before that write, for as long as the test needs, and
// resumes once the hold is lifted; no code under test knows about it.
type hold struct {
	// what names the refused write in messages.
	what string
	// group, resource (with "/status" for the status subresource) the write goes to.
	group, resource string
	// deny is a CEL expression over object and oldObject: true refuses the update.
	deny string
}

var holdSeq atomic.Int32

// holdNamespace is where the canary ConfigMaps are tried (dry run: nothing is stored).
const holdNamespace = "default"

// apply installs the hold and returns once the kube-apiserver enforces it, and a function
// that lifts it and returns once it no longer does. A canary in the same policy tells when
// the policy is in force: a dry-run create of the canary ConfigMap is refused exactly then.
func (h hold) apply(e *testenv.Env) (lift func()) {
	e.T.Helper()
	ctx := context.Background()
	id := fmt.Sprintf("test-hold-%d", holdSeq.Add(1))
	canary := id + "-canary"
	fail := admissionregistrationv1.Fail
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: id},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{
				{RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{"CREATE"},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
				{RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{"UPDATE"},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{h.group}, APIVersions: []string{"*"}, Resources: []string{h.resource}}}},
			}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("request.resource.resource == 'configmaps' ? object.metadata.name != %q : !(%s)", canary, h.deny),
				Message:    "held by the test: " + h.what,
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: id},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: id,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	if err := e.Client.Create(ctx, policy); err != nil {
		e.T.Fatalf("hold %s: %v", h.what, err)
	}
	if err := e.Client.Create(ctx, binding); err != nil {
		e.T.Fatalf("hold %s: %v", h.what, err)
	}
	enforced := func(ctx context.Context) (bool, error) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: canary, Namespace: holdNamespace}}
		err := e.Client.Create(ctx, cm, client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), "held by the test") {
			return true, nil
		}
		return false, err
	}
	e.Eventually(30*time.Second, "hold in force: "+h.what, func(ctx context.Context) (bool, string, error) {
		ok, err := enforced(ctx)
		return ok, fmt.Sprint(err), nil
	})
	return func() {
		e.T.Helper()
		_ = e.Client.Delete(ctx, binding)
		_ = e.Client.Delete(ctx, policy)
		e.Eventually(30*time.Second, "hold lifted: "+h.what, func(ctx context.Context) (bool, string, error) {
			ok, err := enforced(ctx)
			return !ok && err == nil, fmt.Sprint(err), nil
		})
	}
}

// CEL helpers for hold expressions.

func celHasCondition(obj, typ, status string) string {
	return fmt.Sprintf("(%s.?status.?conditions.orValue([]).exists(c, c.type == %q && c.status == %q))", obj, typ, status)
}

func celHasFinalizer(obj, f string) string {
	return fmt.Sprintf("(%q in %s.metadata.?finalizers.orValue([]))", f, obj)
}

func celHasAnnotation(obj, a string) string {
	return fmt.Sprintf("(%q in %s.metadata.?annotations.orValue({}))", a, obj)
}

func celNamed(name string) string { return fmt.Sprintf("(object.metadata.name == %q)", name) }
