package manager

import (
	"context"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// crdMatch is what a REST mapping looked up: a kind (by group and kind) or a resource (by
// group and plural or singular name), in one of versions (any when empty).
type crdMatch struct {
	group, kind, resource string
	versions              []string
}

func kindMatch(gk schema.GroupKind, versions []string) crdMatch {
	return crdMatch{group: gk.Group, kind: gk.Kind, versions: versions}
}

func resourceMatch(r schema.GroupVersionResource) crdMatch {
	var versions []string
	if r.Version != "" {
		versions = []string{r.Version}
	}
	return crdMatch{group: r.Group, resource: r.Resource, versions: versions}
}

func (m crdMatch) String() string {
	name := m.kind
	if m.kind == "" {
		name = m.resource
	}
	if m.group != "" {
		name += "." + m.group
	}
	if len(m.versions) > 0 {
		name += " " + strings.Join(m.versions, ",")
	}
	return name
}

// servedBy reports whether crd, Established, serves the kind or resource at one of the versions.
func (m crdMatch) servedBy(crd *apiextensionsv1.CustomResourceDefinition) bool {
	names := crd.Spec.Names
	if crd.Spec.Group != m.group || !established(crd) {
		return false
	}
	if m.kind != "" && names.Kind != m.kind {
		return false
	}
	if m.resource != "" && names.Plural != m.resource && names.Singular != m.resource {
		return false
	}
	return slices.ContainsFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
		return v.Served && (m.anyVersion() || slices.Contains(m.versions, v.Name))
	})
}

func (m crdMatch) anyVersion() bool {
	return len(m.versions) == 0 || len(m.versions) == 1 && m.versions[0] == ""
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return slices.ContainsFunc(crd.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
		return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
	})
}

// listedCRDServes answers crdMatch lookups by listing the cluster's CRDs. It is asked only
// after a "no match", which outside an API server's restart means a kind not installed (a
// platform the cluster does not run): one list each, at setup.
func listedCRDServes(c apiextensionsclient.Interface) func(crdMatch) (bool, error) {
	return func(m crdMatch) (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		crds, err := c.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for i := range crds.Items {
			if m.servedBy(&crds.Items[i]) {
				return true, nil
			}
		}
		return false, nil
	}
}
