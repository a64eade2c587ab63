package lab

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/config/admission"
)

// InstallAdmission creates or updates machina's admission policies and their bindings.
func InstallAdmission(ctx context.Context, cfg *rest.Config) (int, error) {
	objs, err := admission.Objects()
	if err != nil {
		return 0, err
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return 0, err
	}
	for _, o := range objs {
		existing := &unstructured.Unstructured{}
		existing.SetGroupVersionKind(o.GroupVersionKind())
		err := c.Get(ctx, client.ObjectKeyFromObject(o), existing)
		switch {
		case apierrors.IsNotFound(err):
			err = c.Create(ctx, o)
		case err == nil:
			o.SetResourceVersion(existing.GetResourceVersion())
			err = c.Update(ctx, o)
		}
		if err != nil {
			return 0, fmt.Errorf("installing %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return len(objs), waitAdmissionActive(ctx, c)
}

// waitAdmissionActive waits until the policies answer: the apiserver loads policies and the
// schemas of their resources a moment after they are created, and until then requests for
// Machines fail. A dry-run Machine without an instance type must come back defaulted.
func waitAdmissionActive(ctx context.Context, c client.Client) error {
	probe := func() (bool, string) {
		m := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
			"metadata": map[string]any{"name": "machina-admission-probe", "namespace": "default"},
			"spec": map[string]any{"providerSpec": map[string]any{"value": map[string]any{
				"apiVersion": "infrastructure.machina.dev/v1alpha1", "kind": "SimMachineProviderSpec",
				"region": "sim-east-1", "zone": "sim-east-1a"}}},
		}}
		if err := c.Create(ctx, m, client.DryRunAll); err != nil {
			return false, err.Error()
		}
		t, _, _ := unstructured.NestedString(m.Object, "spec", "providerSpec", "value", "instanceType")
		return t != "", "the defaulting policy is not active yet"
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		ok, why := probe()
		last = why
		return ok, nil
	})
	if err != nil {
		return fmt.Errorf("admission policies not active: %v (last: %s)", err, last)
	}
	return nil
}
