package lab

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// CAPAVersion is the Cluster API Provider AWS release the lab runs: the version machina's
// go.mod pins for the provider's API types, so the controller and machina agree on the kinds.
const CAPAVersion = "v2.13.0"

// capaModule is the provider's module path; its root package is the controller manager.
const capaModule = "sigs.k8s.io/cluster-api-provider-aws/v2"

// The lab builds CAPA's manager from this module, separate from machina's own and from the
// control-plane tools module: CAPA pins its own cluster-api, controller-runtime and
// Kubernetes libraries. Refresh: a module requiring capaModule@CAPAVersion, `go mod tidy`.
var (
	//go:embed capamod/go.mod.txt
	capaGoMod []byte
	//go:embed capamod/go.sum.txt
	capaGoSum []byte
)

// CAPABuild is a built CAPA controller manager and the manifests of its release.
type CAPABuild struct {
	// Manager is the controller manager executable.
	Manager string
	// Dir holds the release's manifests copied from the module: config/rbac/*.yaml,
	// config/webhook/manifests.yaml, config/crd/kustomization.yaml and config/crd/bases/*.yaml
	// under the same paths.
	Dir string
}

// capaManifests are the files of the module StartCAPA reads, relative to its root.
var capaManifests = []string{
	"config/rbac/role.yaml",
	"config/rbac/role_binding.yaml",
	"config/rbac/serviceaccount.yaml",
	"config/webhook/manifests.yaml",
	"config/crd/kustomization.yaml",
}

// capaBuild builds CAPA's manager and copies the release's manifests next to it.
var capaBuild = moduleBuild{
	what:     "the Cluster API Provider AWS " + CAPAVersion + " controller",
	version:  "capa-" + CAPAVersion,
	goMod:    capaGoMod,
	goSum:    capaGoSum,
	out:      "dist",
	estimate: "this happens once per version and takes about 10 minutes on 2 cores; later starts take seconds",
	complete: capaComplete,
	build: func(ctx context.Context, src, scratch string, start time.Time, progress io.Writer) error {
		ldflags := "-s -w -X sigs.k8s.io/cluster-api-provider-aws/v2/version.gitVersion=" + CAPAVersion
		if err := goBuild(ctx, "the CAPA controller", src, capaModule, filepath.Join(scratch, "manager"), ldflags, start, progress); err != nil {
			return err
		}
		return copyCAPAManifests(ctx, src, scratch)
	},
}

// EnsureCAPA returns CAPA's controller manager, building it on first use with `go build` from
// the pinned module into the cache directory (CacheDir), keyed by version. Concurrent callers
// wait on a file lock for one build. Progress goes to progress. The build needs Go and the
// module proxy (or a filled module cache) and takes about ten minutes on two cores.
func EnsureCAPA(ctx context.Context, progress io.Writer) (CAPABuild, error) {
	dist, err := capaBuild.ensure(ctx, progress)
	if err != nil {
		return CAPABuild{}, err
	}
	return CAPABuild{Manager: filepath.Join(dist, "manager"), Dir: dist}, nil
}

// capaComplete checks that the build left the executable and every manifest in dist.
func capaComplete(dist string) error {
	if err := allExecutable(filepath.Join(dist, "manager")); err != nil {
		return err
	}
	for _, m := range capaManifests {
		if _, err := os.Stat(filepath.Join(dist, m)); err != nil {
			return err
		}
	}
	_, err := os.Stat(filepath.Join(dist, "config", "crd", "bases"))
	return err
}

// copyCAPAManifests copies the release's RBAC, webhook and CRD manifests from the module
// cache (where the build left the module) into dst.
func copyCAPAManifests(ctx context.Context, src, dst string) error {
	root, err := goListModuleDir(ctx, src, capaModule)
	if err != nil {
		return err
	}
	crds, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(crds) == 0 {
		return fmt.Errorf("no CRDs under %s/config/crd/bases (%v)", root, err)
	}
	files := append([]string{}, capaManifests...)
	for _, c := range crds {
		files = append(files, filepath.Join("config", "crd", "bases", filepath.Base(c)))
	}
	for _, f := range files {
		if !filepath.IsLocal(f) {
			return fmt.Errorf("manifest path %q leaves the module", f)
		}
		if err := copyFile(filepath.Join(root, f), filepath.Join(dst, f)); err != nil {
			return err
		}
	}
	return nil
}
