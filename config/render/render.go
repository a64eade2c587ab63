// Package render builds the objects a kustomization directory under config/ describes, so
// that the lab and the tests install and check exactly what `kubectl apply -k` would.
//
// It implements only the part of kustomize that machina's kustomizations use, and refuses
// anything else instead of ignoring it:
//
//   - resources: YAML files (one or more documents) and directories holding a
//     kustomization.yaml, relative to the kustomization;
//   - patches: an inline JSON 6902 patch (`patch:`) applied to the objects its target
//     selects by kind and name (group, version and namespace optional).
//
// Objects come out in kustomize's install order (namespaces, CRDs, RBAC, then the rest),
// each kind group in the order the resources listed them.
package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// File is the name of a kustomization in a directory.
const File = "kustomization.yaml"

// Kustomization is the supported subset of kustomize.config.k8s.io/v1beta1 Kustomization.
type Kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources,omitempty"`
	Patches    []Patch  `json:"patches,omitempty"`
}

// Patch is an inline JSON 6902 patch and the objects it applies to.
type Patch struct {
	Target Target `json:"target"`
	Patch  string `json:"patch"`
}

// Target selects objects by kind and name (and optionally group, version, namespace).
type Target struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version,omitempty"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

// Render returns the objects of the kustomization in dir of fsys.
func Render(fsys fs.FS, dir string) ([]*unstructured.Unstructured, error) {
	objs, err := render(fsys, path.Clean(dir), nil)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, o := range objs {
		id := o.GroupVersionKind().GroupKind().String() + " " + o.GetNamespace() + "/" + o.GetName()
		if seen[id] {
			return nil, fmt.Errorf("%s: %s appears twice", dir, id)
		}
		seen[id] = true
	}
	sort.SliceStable(objs, func(i, j int) bool { return rank(objs[i]) < rank(objs[j]) })
	return objs, nil
}

func render(fsys fs.FS, dir string, stack []string) ([]*unstructured.Unstructured, error) {
	for _, d := range stack {
		if d == dir {
			return nil, fmt.Errorf("kustomization %s includes itself (via %s)", dir, strings.Join(stack, " -> "))
		}
	}
	stack = append(stack, dir)
	k, err := Read(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, r := range k.Resources {
		p := path.Join(dir, r)
		if !fs.ValidPath(p) {
			return nil, fmt.Errorf("%s/%s: resource %q is outside the tree being rendered", dir, File, r)
		}
		st, err := fs.Stat(fsys, p)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: resource %q: %w", dir, File, r, err)
		}
		var objs []*unstructured.Unstructured
		if st.IsDir() {
			objs, err = render(fsys, p, stack)
		} else {
			objs, err = decodeFile(fsys, p)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	for i, p := range k.Patches {
		if err := apply(out, p); err != nil {
			return nil, fmt.Errorf("%s/%s: patches[%d]: %w", dir, File, i, err)
		}
	}
	return out, nil
}

// Read decodes dir's kustomization, refusing fields this renderer does not implement.
func Read(fsys fs.FS, dir string) (*Kustomization, error) {
	name := path.Join(dir, File)
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, err
	}
	k := &Kustomization{}
	if err := yaml.UnmarshalStrict(data, k); err != nil {
		return nil, fmt.Errorf("%s: %w (only apiVersion, kind, resources and patches with an inline JSON 6902 patch are supported)", name, err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		return nil, fmt.Errorf("%s: apiVersion/kind must be kustomize.config.k8s.io/v1beta1 Kustomization, not %s %s", name, k.APIVersion, k.Kind)
	}
	return k, nil
}

func decodeFile(fsys fs.FS, name string) ([]*unstructured.Unstructured, error) {
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("%s: a document lacks apiVersion, kind or metadata.name", name)
		}
		out = append(out, u)
	}
	return out, nil
}

func apply(objs []*unstructured.Unstructured, p Patch) error {
	t := p.Target
	if t.Kind == "" || t.Name == "" {
		return errors.New("target needs kind and name")
	}
	ops, err := yaml.YAMLToJSON([]byte(p.Patch))
	if err != nil {
		return fmt.Errorf("patch: %w", err)
	}
	patch, err := jsonpatch.DecodePatch(ops)
	if err != nil {
		return fmt.Errorf("patch is not a JSON 6902 patch: %w", err)
	}
	matched := 0
	for _, o := range objs {
		gv, _ := schema.ParseGroupVersion(o.GetAPIVersion())
		if o.GetKind() != t.Kind || o.GetName() != t.Name ||
			(t.Group != "" && gv.Group != t.Group) || (t.Version != "" && gv.Version != t.Version) ||
			(t.Namespace != "" && o.GetNamespace() != t.Namespace) {
			continue
		}
		doc, err := json.Marshal(o.Object)
		if err != nil {
			return err
		}
		patched, err := patch.Apply(doc)
		if err != nil {
			return fmt.Errorf("%s %s: %w", t.Kind, t.Name, err)
		}
		o.Object = map[string]any{}
		if err := json.Unmarshal(patched, &o.Object); err != nil {
			return err
		}
		matched++
	}
	if matched == 0 {
		return fmt.Errorf("target %s %s matches no resource", t.Kind, t.Name)
	}
	return nil
}

// rank orders kinds the way kustomize's legacy ordering does for the kinds config/ uses:
// what others depend on first, so that a plain `kubectl apply` of the output succeeds.
func rank(o *unstructured.Unstructured) int {
	order := []string{"Namespace", "CustomResourceDefinition", "ServiceAccount", "Role", "ClusterRole",
		"RoleBinding", "ClusterRoleBinding", "ConfigMap", "Secret", "Service", "Deployment"}
	for i, k := range order {
		if o.GetKind() == k {
			return i
		}
	}
	return len(order)
}
