package render_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/machina-dev/machina/config/render"
)

const kz = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"

func file(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }

func TestRenderResourcesDirectoriesAndPatches(t *testing.T) {
	fsys := fstest.MapFS{
		"top/kustomization.yaml": file(kz + `resources:
- ../base
- extra.yaml
patches:
- target: {kind: Deployment, name: web}
  patch: |-
    - op: replace
      path: /spec/replicas
      value: 3
`),
		"top/extra.yaml":          file("apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: ns}\n"),
		"base/kustomization.yaml": file(kz + "resources:\n- all.yaml\n"),
		"base/all.yaml": file(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ns}
spec: {replicas: 1}
---
# a comment-only document is skipped
---
apiVersion: v1
kind: Namespace
metadata: {name: ns}
`),
	}
	objs, err := render.Render(fsys, "top")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
	}
	// Namespaces first, Services before Deployments (kustomize's install order).
	if got := strings.Join(kinds, ","); got != "Namespace,Service,Deployment" {
		t.Fatalf("kinds in order %s", got)
	}
	if r := objs[2].Object["spec"].(map[string]any)["replicas"]; r != float64(3) && r != int64(3) {
		t.Errorf("patched replicas %v (%T)", r, r)
	}
}

func TestRenderRefusesWhatItDoesNotImplement(t *testing.T) {
	for name, tc := range map[string]struct {
		fsys fstest.MapFS
		want string
	}{
		"unknown field":         {fstest.MapFS{"k/kustomization.yaml": file(kz + "namePrefix: x-\n")}, "namePrefix"},
		"strategic merge patch": {fstest.MapFS{"k/kustomization.yaml": file(kz + "patches:\n- path: p.yaml\n")}, "path"},
		"wrong kind":            {fstest.MapFS{"k/kustomization.yaml": file("apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n")}, "Kustomization"},
		"patch matching nothing": {fstest.MapFS{
			"k/kustomization.yaml": file(kz + "resources: [a.yaml]\npatches:\n- target: {kind: Deployment, name: other}\n  patch: '[]'\n"),
			"k/a.yaml":             file("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"),
		}, "matches no resource"},
		"duplicate object": {fstest.MapFS{
			"k/kustomization.yaml": file(kz + "resources: [a.yaml, b.yaml]\n"),
			"k/a.yaml":             file("apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n"),
			"k/b.yaml":             file("apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n"),
		}, "twice"},
		"missing resource": {fstest.MapFS{"k/kustomization.yaml": file(kz + "resources: [gone.yaml]\n")}, "gone.yaml"},
		"cycle": {fstest.MapFS{
			"k/kustomization.yaml": file(kz + "resources: [../j]\n"),
			"j/kustomization.yaml": file(kz + "resources: [../k]\n"),
		}, "includes itself"},
		"object without name": {fstest.MapFS{
			"k/kustomization.yaml": file(kz + "resources: [a.yaml]\n"),
			"k/a.yaml":             file("apiVersion: v1\nkind: Namespace\n"),
		}, "metadata.name"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := render.Render(tc.fsys, "k")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}
