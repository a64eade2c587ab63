package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// checkMAOInfrastructure refuses to start when the Infrastructure "cluster" the machineset
// command reads at start is missing or has no status.platformStatus: the command would exit
// (or crash on the missing platform status) with a less helpful message.
func (l *Lab) checkMAOInfrastructure(ctx context.Context) error {
	c, err := client.New(l.Config, client.Options{})
	if err != nil {
		return err
	}
	infra := &unstructured.Unstructured{}
	infra.SetAPIVersion("config.openshift.io/v1")
	infra.SetKind("Infrastructure")
	err = c.Get(ctx, client.ObjectKey{Name: "cluster"}, infra)
	if apierrors.IsNotFound(err) {
		return errors.New(`lab: StartMAO: create the Infrastructure "cluster" (with status.platformStatus) first; ` +
			"machine-api-operator's machineset command reads it when it starts")
	}
	if err != nil {
		return err
	}
	if t, _, _ := unstructured.NestedString(infra.Object, "status", "platformStatus", "type"); t == "" {
		return errors.New(`lab: StartMAO: the Infrastructure "cluster" has no status.platformStatus.type; ` +
			"machine-api-operator's machineset command needs it when it starts")
	}
	return nil
}

// installMAO gives the lab what the commands need before they start: the DNS CRD and DNS
// "cluster" (when absent) and the RBAC of MAOServiceAccount, with the namespaces it lives in.
func (l *Lab) installMAO(ctx context.Context, b MAOBuild) error {
	c, err := client.New(l.Config, client.Options{})
	if err != nil {
		return err
	}
	if err := l.installMAODNS(ctx, c, b); err != nil {
		return err
	}
	return l.InstallMAORBAC(ctx, filepath.Join(b.Dir, maoRBACManifest))
}

// InstallMAORBAC installs, from machine-api-operator's RBAC manifest at path (its
// install/0000_30_machine-api-operator_09_rbac.yaml), the ServiceAccount MAOServiceAccount with
// its namespaces, the bindings naming it and the roles they bind, and waits until the
// authorizer grants MAOUser all of them. StartMAO does it with its build's copy; a process
// that runs machine-api-operator's controllers as a library under that identity (MAOConfig)
// does it with the manifest of the module it was built with.
func (l *Lab) InstallMAORBAC(ctx context.Context, path string) error {
	c, err := client.New(l.Config, client.Options{})
	if err != nil {
		return err
	}
	objs, err := maoRBAC(path)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" {
			nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
			if err := c.Create(ctx, nsObj); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating namespace %s: %w", ns, err)
			}
		}
	}
	for _, o := range objs {
		if err := applyUnstructured(ctx, c, o); err != nil {
			return fmt.Errorf("installing machine-api-operator's %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return waitMAOAllowed(ctx, c, objs)
}

// installMAODNS installs the DNS CRD of the build's openshift/api unless the lab serves the
// kind already, and creates DNS "cluster" (no zones: a cluster without public DNS) if absent.
func (l *Lab) installMAODNS(ctx context.Context, c client.Client, b MAOBuild) error {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := readManifest(filepath.Join(b.Dir, maoDNSCRD), crd); err != nil {
		return err
	}
	installed := &unstructured.Unstructured{}
	installed.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, installed)
	if apierrors.IsNotFound(err) {
		_, err = applyCRDs(ctx, l.Config, []*apiextensionsv1.CustomResourceDefinition{crd})
	}
	if err != nil {
		return fmt.Errorf("installing the DNS CRD: %w", err)
	}
	dns := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "config.openshift.io/v1", "kind": "DNS",
		"metadata": map[string]any{"name": "cluster"}, "spec": map[string]any{},
	}}
	if err := c.Create(ctx, dns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf(`creating DNS "cluster": %w`, err)
	}
	return nil
}

// maoRBAC reads machine-api-operator's RBAC manifest and returns what gives MAOServiceAccount
// its rights: the ServiceAccount, the bindings naming it, and the roles they bind. The
// operator's own identity, the termination handler's and monitoring's are left out.
func maoRBAC(path string) ([]*unstructured.Unstructured, error) {
	all, err := readManifests(path)
	if err != nil {
		return nil, err
	}
	var bindings, out []*unstructured.Unstructured
	for _, o := range all {
		switch {
		case o.GetKind() == "ServiceAccount" && o.GetName() == MAOServiceAccount && o.GetNamespace() == MAONamespace:
			out = append(out, o)
		case strings.HasSuffix(o.GetKind(), "Binding") && bindsMAO(o):
			bindings = append(bindings, o)
		}
	}
	if len(out) != 1 || len(bindings) == 0 {
		return nil, fmt.Errorf("%s declares no ServiceAccount %s/%s with bindings", path, MAONamespace, MAOServiceAccount)
	}
	for _, b := range bindings {
		kind, _, _ := unstructured.NestedString(b.Object, "roleRef", "kind")
		name, _, _ := unstructured.NestedString(b.Object, "roleRef", "name")
		ns := b.GetNamespace() // a Role lives in its RoleBinding's namespace
		if kind == "ClusterRole" {
			ns = ""
		}
		role := findObject(all, kind, ns, name)
		if role == nil {
			return nil, fmt.Errorf("%s: %s %s binds %s %s, which the manifest does not declare", path, b.GetKind(), b.GetName(), kind, name)
		}
		out = append(out, role, b)
	}
	return out, nil
}

// bindsMAO reports whether binding b names MAOServiceAccount among its subjects.
func bindsMAO(b *unstructured.Unstructured) bool {
	subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
	for _, s := range subjects {
		m, _ := s.(map[string]any)
		if m["kind"] == "ServiceAccount" && m["name"] == MAOServiceAccount && m["namespace"] == MAONamespace {
			return true
		}
	}
	return false
}

func findObject(objs []*unstructured.Unstructured, kind, ns, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetNamespace() == ns && o.GetName() == name {
			return o
		}
	}
	return nil
}

// readManifests decodes every YAML document of path.
func readManifests(path string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// applyUnstructured creates o or replaces the existing object's content with o's; an
// aggregated ClusterRole keeps the rules kube-controller-manager (if the lab runs it) put in.
func applyUnstructured(ctx context.Context, c client.Client, o *unstructured.Unstructured) error {
	o = o.DeepCopy()
	existing := &unstructured.Unstructured{}
	existing.SetGroupVersionKind(o.GroupVersionKind())
	err := c.Get(ctx, client.ObjectKeyFromObject(o), existing)
	switch {
	case apierrors.IsNotFound(err):
		return c.Create(ctx, o)
	case err != nil:
		return err
	}
	o.SetResourceVersion(existing.GetResourceVersion())
	if _, aggregated := o.Object["aggregationRule"]; aggregated {
		o.Object["rules"] = existing.Object["rules"]
	}
	return c.Update(ctx, o)
}

// waitMAOAllowed waits until the authorizer grants MAOUser every rule of the roles in objs
// (in a Role's namespace, or cluster-wide): RBAC objects take effect a moment after they are
// created, and the machineset command's one-shot reads at start must not race them.
func waitMAOAllowed(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, o := range objs {
			if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
				continue
			}
			role := &rbacv1.ClusterRole{} // a Role's rules decode the same
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, role); err != nil {
				return false, err
			}
			for _, rule := range role.Rules {
				if why, err := ruleAllowed(ctx, c, MAOUser, maoGroups, o.GetNamespace(), rule); err != nil || why != "" {
					last = fmt.Sprintf("%s %s: %s%v", o.GetKind(), o.GetName(), why, err)
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%s is not granted machine-api-operator's RBAC: %v (last: %s)", MAOUser, err, last)
	}
	return nil
}
