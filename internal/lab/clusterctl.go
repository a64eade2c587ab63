package lab

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/machina-dev/machina/internal/flock"
)

// ClusterctlVersion is the upstream clusterctl tests build; it must be the
// sigs.k8s.io/cluster-api version machina's go.mod pins (a test checks).
const ClusterctlVersion = "v1.14.2"

// clusterctl is built from its own module: its command-line dependencies are not machina's.
var (
	//go:embed clusterctlmod/go.mod.txt
	clusterctlGoMod []byte
	//go:embed clusterctlmod/go.sum.txt
	clusterctlGoSum []byte
)

func clusterctlKey() string {
	sum := sha256.Sum256(append(append([]byte{}, clusterctlGoMod...), clusterctlGoSum...))
	return fmt.Sprintf("clusterctl-%s-%s", ClusterctlVersion, hex.EncodeToString(sum[:])[:12])
}

// EnsureClusterctl returns the path of the upstream clusterctl binary, building it from the
// pinned module into the cache directory on first use (one build per version; concurrent
// callers wait on a file lock). Progress goes to progress.
func EnsureClusterctl(ctx context.Context, progress io.Writer) (string, error) {
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, clusterctlKey())
	bin := filepath.Join(dir, "bin", "clusterctl")
	if allExecutable(bin) == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	unlock, err := flock.Lock(ctx, filepath.Join(dir, "build.lock"), func() {
		fmt.Fprintln(progress, "lab: another process is building clusterctl; waiting for it")
	})
	if err != nil {
		return "", err
	}
	defer unlock()
	if allExecutable(bin) == nil {
		return bin, nil
	}
	if err := buildClusterctl(ctx, dir, progress); err != nil {
		return "", err
	}
	return bin, allExecutable(bin)
}

// buildClusterctl compiles clusterctl into dir/bin through a scratch directory and a rename,
// so an interrupted build never leaves a half-written binary behind.
func buildClusterctl(ctx context.Context, dir string, progress io.Writer) error {
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), clusterctlGoMod, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "go.sum"), clusterctlGoSum, 0o644); err != nil {
		return err
	}
	scratch, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	fmt.Fprintf(progress, "lab: building clusterctl %s from source into %s (once per version)\n", ClusterctlVersion, dir)
	start := time.Now()
	ldflags := "-s -w -X sigs.k8s.io/cluster-api/version.gitVersion=" + ClusterctlVersion
	args := []string{"build", "-trimpath", "-ldflags", ldflags, "-o", filepath.Join(scratch, "clusterctl"), "sigs.k8s.io/cluster-api/cmd/clusterctl"}
	if err := runWithProgress(ctx, src, progress, "lab: building clusterctl", start, "go", args...); err != nil {
		return fmt.Errorf("building clusterctl: %w", err)
	}
	bin := filepath.Join(dir, "bin")
	_ = os.RemoveAll(bin)
	if err := os.Rename(scratch, bin); err != nil {
		return err
	}
	fmt.Fprintf(progress, "lab: clusterctl ready after %s\n", time.Since(start).Round(time.Second))
	return nil
}
