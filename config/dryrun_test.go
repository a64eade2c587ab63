package config_test

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/testenv"
)

// Every manifest an install applies passes the lab apiserver's validation and admission:
// server-side apply with dry run, as `kubectl apply --server-side --dry-run=server -k` does.
// Objects the lab installed already (CRDs, policies, RBAC) are dry-run updates.
func testDryRun(e *testenv.Env) {
	t, ctx := e.T, context.Background()
	apply := func(o *unstructured.Unstructured) error {
		return e.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()),
			client.DryRunAll, client.ForceOwnership, client.FieldOwner("machina-install-test"))
	}
	seen := map[string]bool{}
	for _, dir := range []string{"crd/upstream", "default", "bridge", "openshift"} {
		objs := renderDir(t, dir)
		for _, o := range objs {
			if err := apply(o); err != nil {
				t.Errorf("config/%s: %s %s: %v", dir, o.GetKind(), o.GetName(), err)
			}
			seen[o.GetKind()] = true
		}
		t.Logf("config/%s: %d objects dry-run", dir, len(objs))
	}
	for _, k := range []string{"Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "Role",
		"ClusterRoleBinding", "RoleBinding", "Deployment", "Service", "ValidatingAdmissionPolicy", "MutatingAdmissionPolicy"} {
		if !seen[k] {
			t.Errorf("no %s among the manifests", k)
		}
	}
	// The dry run does validate: a Deployment with a field its schema lacks is refused.
	for _, o := range renderDir(t, "default") {
		if o.GetKind() != "Deployment" {
			continue
		}
		bad := o.DeepCopy()
		_ = unstructured.SetNestedField(bad.Object, "yes", "spec", "template", "spec", "runAsRoot")
		if err := apply(bad); err == nil || !strings.Contains(err.Error(), "runAsRoot") {
			t.Errorf("a Deployment with an unknown field passed the dry run: %v", err)
		}
	}
}
