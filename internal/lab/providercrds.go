package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// ModuleDir is the directory of the Go module that provides package pkg, as the build of the
// current module resolves it (`go list -f {{.Module.Dir}}`, run in the working directory).
func ModuleDir(pkg string) (string, error) {
	out, err := exec.Command("go", "list", "-f", "{{.Module.Dir}}", pkg).Output()
	if err != nil {
		msg := err.Error()
		if ee, ok := err.(*exec.ExitError); ok {
			msg = strings.TrimSpace(string(ee.Stderr))
		}
		return "", fmt.Errorf("finding the module of %s: %s", pkg, msg)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("finding the module of %s: go list names no module directory", pkg)
	}
	return dir, nil
}

// crdKustomization is what ModuleCRDs reads of a provider's config/crd/kustomization.yaml:
// the labels it adds to every CRD (either kustomize form) and its patches, from files or
// inline with a target (how CAPIBM labels its PowerVS CRDs with their contract version).
type crdKustomization struct {
	CommonLabels map[string]string `json:"commonLabels"`
	Labels       []struct {
		Pairs map[string]string `json:"pairs"`
	} `json:"labels"`
	Patches []struct {
		Path   string `json:"path"`
		Patch  string `json:"patch"`
		Target *struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"target"`
	} `json:"patches"`
	PatchesStrategicMerge []string `json:"patchesStrategicMerge"`
}

// crdPatch is what labelsFor reads of a patch: the CRD it names and its labels.
type crdPatch struct {
	Kind     string            `json:"kind"`
	Metadata metav1.ObjectMeta `json:"metadata"`
}

// ModuleCRDs reads the CRDs of kinds from a Cluster API provider's module checked out at dir
// (config/crd/bases, or config/default/crd/bases where the provider keeps them there, as CAPV
// does), with the labels the kustomization beside them gives them: the
// kustomization's own labels and those of its patches that name the CRD (how CAPZ declares
// contract versions) or whose target matches it (CAPIBM's inline patches). Nothing else of a
// patch is taken: the conversion-webhook patches need the provider's webhook server, which the
// lab does not run.
func ModuleCRDs(dir string, kinds ...schema.GroupKind) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	crdDir := filepath.Join(dir, "config", "crd")
	if _, err := os.Stat(filepath.Join(crdDir, "kustomization.yaml")); os.IsNotExist(err) {
		crdDir = filepath.Join(dir, "config", "default", "crd")
	}
	var kust crdKustomization
	if err := readManifest(filepath.Join(crdDir, "kustomization.yaml"), &kust); err != nil {
		return nil, err
	}
	bases, err := filepath.Glob(filepath.Join(crdDir, "bases", "*.yaml"))
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, gk := range kinds {
		crd, err := findCRD(bases, gk)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
		labels, err := kust.labelsFor(crdDir, crd.Name)
		if err != nil {
			return nil, err
		}
		if crd.Labels == nil {
			crd.Labels = map[string]string{}
		}
		for k, v := range labels {
			crd.Labels[k] = v
		}
		out = append(out, crd)
	}
	return out, nil
}

// findCRD reads the CRD of gk among the files.
func findCRD(files []string, gk schema.GroupKind) (*apiextensionsv1.CustomResourceDefinition, error) {
	for _, f := range files {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := readManifest(f, crd); err != nil {
			return nil, err
		}
		if crd.Kind == "CustomResourceDefinition" && crd.Spec.Group == gk.Group && crd.Spec.Names.Kind == gk.Kind {
			return crd, nil
		}
	}
	return nil, fmt.Errorf("no CRD of %s in the CRD bases", gk)
}

// labelsFor collects the labels the kustomization in crdDir puts on the CRD named name.
func (k crdKustomization) labelsFor(crdDir, name string) (map[string]string, error) {
	labels := map[string]string{}
	for key, v := range k.CommonLabels {
		labels[key] = v
	}
	for _, l := range k.Labels {
		for key, v := range l.Pairs {
			labels[key] = v
		}
	}
	paths := slices.Clone(k.PatchesStrategicMerge)
	for _, p := range k.Patches {
		switch {
		case p.Path != "":
			paths = append(paths, p.Path)
		case p.Patch != "":
			var patch crdPatch
			if err := yaml.Unmarshal([]byte(p.Patch), &patch); err != nil {
				return nil, fmt.Errorf("%s: an inline patch: %w", crdDir, err)
			}
			matches := patch.Kind == "CustomResourceDefinition" && patch.Metadata.Name == name
			if t := p.Target; t != nil {
				// kustomize matches a target's name as a regular expression of the whole name.
				re, err := regexp.Compile("^(?:" + t.Name + ")$")
				if err != nil {
					return nil, fmt.Errorf("%s: a patch target: %w", crdDir, err)
				}
				matches = (t.Kind == "" || t.Kind == "CustomResourceDefinition") && re.MatchString(name)
			}
			if matches {
				for key, v := range patch.Metadata.Labels {
					labels[key] = v
				}
			}
		}
	}
	for _, p := range paths {
		var patch crdPatch
		if err := readManifest(filepath.Join(crdDir, p), &patch); err != nil {
			if os.IsNotExist(err) {
				continue // listed but not shipped in the module: nothing to take from it
			}
			return nil, err
		}
		if patch.Kind != "CustomResourceDefinition" || patch.Metadata.Name != name {
			continue
		}
		for key, v := range patch.Metadata.Labels {
			labels[key] = v
		}
	}
	return labels, nil
}

// InstallModuleCRDs installs the CRDs ModuleCRDs reads, creating them or updating an existing
// CRD of the same name, and waits until each is served. It returns how many it installed.
func InstallModuleCRDs(ctx context.Context, cfg *rest.Config, dir string, kinds ...schema.GroupKind) (int, error) {
	crds, err := ModuleCRDs(dir, kinds...)
	if err != nil {
		return 0, err
	}
	return applyCRDs(ctx, cfg, crds)
}
