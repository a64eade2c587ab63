package lab

import (
	"context"
	"crypto/sha256"
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

// moduleBuild is an upstream program (or several) compiled from a pinned module embedded in
// machina (go.mod and go.sum) into the cache directory, once per version: the control plane,
// the CAPA controller, clusterctl. Concurrent callers (parallel test packages) wait on a file
// lock for one build, and a build goes through a scratch directory renamed into place, so an
// interrupted one never leaves a partial result.
type moduleBuild struct {
	// what names the program in progress lines and errors.
	what string
	// version goes into the cache key, before a digest of the module graph.
	version      string
	goMod, goSum []byte
	// out is the result's directory under the cache entry ("bin", "dist").
	out string
	// estimate is printed before a build: how long it takes and that it happens once.
	estimate string
	// complete checks a finished result in dir.
	complete func(dir string) error
	// build fills scratch from the module written in src; start is when the build began.
	build func(ctx context.Context, src, scratch string, start time.Time, progress io.Writer) error
}

// key names the cache entry: the version plus a digest of the pinned module graph.
func (m moduleBuild) key() string {
	sum := sha256.Sum256(append(append([]byte{}, m.goMod...), m.goSum...))
	return fmt.Sprintf("%s-%s", m.version, hex.EncodeToString(sum[:])[:12])
}

// ensure returns the result's directory, building it first unless a complete one is cached.
func (m moduleBuild) ensure(ctx context.Context, progress io.Writer) (string, error) {
	if progress == nil {
		progress = io.Discard
	}
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, m.key())
	out := filepath.Join(dir, m.out)
	if m.complete(out) == nil {
		return out, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	unlock, err := flock.Lock(ctx, filepath.Join(dir, "build.lock"), func() {
		fmt.Fprintf(progress, "lab: another process is building %s; waiting for it\n", m.what)
	})
	if err != nil {
		return "", err
	}
	defer unlock()
	// Another process may have finished the build while we waited for the lock.
	if m.complete(out) == nil {
		return out, nil
	}
	if err := m.run(ctx, dir, out, progress); err != nil {
		return "", fmt.Errorf("lab: building %s: %w", m.what, err)
	}
	return out, m.complete(out)
}

// run writes the module into dir/src, builds into a scratch directory and renames it to out.
func (m moduleBuild) run(ctx context.Context, dir, out string, progress io.Writer) error {
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), m.goMod, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "go.sum"), m.goSum, 0o644); err != nil {
		return err
	}
	scratch, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	fmt.Fprintf(progress, "lab: building %s from source into %s\n", m.what, dir)
	fmt.Fprintf(progress, "lab: %s\n", m.estimate)
	start := time.Now()
	if err := m.build(ctx, src, scratch, start, progress); err != nil {
		return err
	}
	_ = os.RemoveAll(out)
	if err := os.Rename(scratch, out); err != nil {
		return err
	}
	fmt.Fprintf(progress, "lab: %s ready after %s\n", m.what, time.Since(start).Round(time.Second))
	return nil
}

// goBuild compiles pkg of the module in src to out with ldflags, printing progress about name.
func goBuild(ctx context.Context, name, src, pkg, out, ldflags string, start time.Time, progress io.Writer) error {
	args := []string{"build", "-trimpath", "-ldflags", ldflags, "-o", out, pkg}
	if err := runWithProgress(ctx, src, progress, "lab: building "+name, start, "go", args...); err != nil {
		return fmt.Errorf("building %s: %w", name, err)
	}
	return nil
}

// goListModuleDir is the directory of module mod as the module in src resolves it.
func goListModuleDir(ctx context.Context, src, mod string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", mod)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOWORK=off")
	out, err := cmd.Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		return "", fmt.Errorf("locating %s in the module cache: %w", mod, err)
	}
	return dir, nil
}

// copyFile copies the file from to the path to, creating its directory: a manifest of a
// pinned module into a build's directory, at a path the build fixes.
func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	//nolint:gosec // to is a fixed or checked-local path under a build directory
	return os.WriteFile(to, b, 0o644)
}
