package lab

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/machina-dev/machina/internal/flock"
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

// capaKey names the cache entry: the version plus a digest of the pinned module graph.
func capaKey() string {
	sum := sha256.Sum256(append(append([]byte{}, capaGoMod...), capaGoSum...))
	return fmt.Sprintf("capa-%s-%s", CAPAVersion, hex.EncodeToString(sum[:])[:12])
}

// EnsureCAPA returns CAPA's controller manager, building it on first use with `go build` from
// the pinned module into the cache directory (CacheDir), keyed by version. Concurrent callers
// wait on a file lock for one build. Progress goes to progress. The build needs Go and the
// module proxy (or a filled module cache) and takes about ten minutes on two cores.
func EnsureCAPA(ctx context.Context, progress io.Writer) (CAPABuild, error) {
	if progress == nil {
		progress = io.Discard
	}
	cache, err := CacheDir()
	if err != nil {
		return CAPABuild{}, err
	}
	dir := filepath.Join(cache, capaKey())
	b := CAPABuild{Manager: filepath.Join(dir, "dist", "manager"), Dir: filepath.Join(dir, "dist")}
	if capaComplete(b) == nil {
		return b, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return CAPABuild{}, err
	}
	unlock, err := flock.Lock(ctx, filepath.Join(dir, "build.lock"), func() {
		fmt.Fprintln(progress, "lab: another process is building the CAPA controller; waiting for it")
	})
	if err != nil {
		return CAPABuild{}, err
	}
	defer unlock()
	if capaComplete(b) == nil {
		return b, nil
	}
	if err := buildCAPA(ctx, dir, progress); err != nil {
		return CAPABuild{}, fmt.Errorf("lab: building the Cluster API Provider AWS %s controller: %w", CAPAVersion, err)
	}
	return b, capaComplete(b)
}

// capaComplete checks that the build left the executable and every manifest.
func capaComplete(b CAPABuild) error {
	if err := allExecutable(b.Manager); err != nil {
		return err
	}
	for _, m := range capaManifests {
		if _, err := os.Stat(filepath.Join(b.Dir, m)); err != nil {
			return err
		}
	}
	_, err := os.Stat(filepath.Join(b.Dir, "config", "crd", "bases"))
	return err
}

// buildCAPA compiles the manager and copies the manifests into dir/dist, through a scratch
// directory and a rename so an interrupted build never leaves a partial result in place.
func buildCAPA(ctx context.Context, dir string, progress io.Writer) error {
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), capaGoMod, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "go.sum"), capaGoSum, 0o644); err != nil {
		return err
	}
	scratch, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)

	fmt.Fprintf(progress, "lab: building the Cluster API Provider AWS controller %s from source into %s\n", CAPAVersion, dir)
	fmt.Fprintln(progress, "lab: this happens once per version and takes about 10 minutes on 2 cores; later starts take seconds")
	start := time.Now()
	ldflags := "-s -w -X sigs.k8s.io/cluster-api-provider-aws/v2/version.gitVersion=" + CAPAVersion
	args := []string{"build", "-trimpath", "-ldflags", ldflags, "-o", filepath.Join(scratch, "manager"), capaModule}
	if err := runWithProgress(ctx, src, progress, "lab: building the CAPA controller", start, "go", args...); err != nil {
		return err
	}
	if err := copyCAPAManifests(ctx, src, scratch); err != nil {
		return err
	}
	dist := filepath.Join(dir, "dist")
	_ = os.RemoveAll(dist)
	if err := os.Rename(scratch, dist); err != nil {
		return err
	}
	fmt.Fprintf(progress, "lab: CAPA controller ready after %s\n", time.Since(start).Round(time.Second))
	return nil
}

// copyCAPAManifests copies the release's RBAC, webhook and CRD manifests from the module
// cache (where the build left the module) into dst.
func copyCAPAManifests(ctx context.Context, src, dst string) error {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", capaModule)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("locating %s in the module cache: %w", capaModule, err)
	}
	root := strings.TrimSpace(string(out))
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
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dst, filepath.Dir(f)), 0o755); err != nil {
			return err
		}
		//nolint:gosec // f is a local path (checked above) of a manifest of the pinned module
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
