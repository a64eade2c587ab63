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

// Versions of the control plane the lab builds. They must match hack/tools/go.mod.
const (
	KubernetesVersion = "v1.36.3"
	EtcdVersion       = "v3.6.8"
)

// The lab builds its binaries from this module (a copy of hack/tools, kept identical by a
// test), so a machina binary can build them anywhere Go is installed, repository or not.
var (
	//go:embed toolsmod/go.mod.txt
	toolsGoMod []byte
	//go:embed toolsmod/go.sum.txt
	toolsGoSum []byte
)

// Binaries are the paths of the control-plane executables.
type Binaries struct {
	Etcd                  string
	KubeAPIServer         string
	KubeControllerManager string
}

var binaryPackages = []struct{ name, pkg string }{
	{"etcd", "go.etcd.io/etcd/server/v3"},
	{"kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver"},
	{"kube-controller-manager", "k8s.io/kubernetes/cmd/kube-controller-manager"},
}

// CacheDir is where built binaries are kept: $MACHINA_CACHE_DIR, or machina/ under the
// user's cache directory (machina-cache/ under the temporary directory when there is none).
func CacheDir() (string, error) {
	if d := os.Getenv("MACHINA_CACHE_DIR"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		// No home directory (some CI sandboxes): the temporary directory still lets runs on
		// the same machine share one build.
		return filepath.Join(os.TempDir(), "machina-cache"), nil
	}
	return filepath.Join(d, "machina"), nil
}

// binaryKey names the cache entry: the versions plus a digest of the pinned module graph.
func binaryKey() string {
	sum := sha256.Sum256(append(append([]byte{}, toolsGoMod...), toolsGoSum...))
	return fmt.Sprintf("kube-%s-etcd-%s-%s", KubernetesVersion, EtcdVersion, hex.EncodeToString(sum[:])[:12])
}

// EnsureBinaries returns the control-plane binaries, building them on first use.
//
// If KUBEBUILDER_ASSETS is set, its etcd and kube-apiserver are used (and its
// kube-controller-manager when present). Otherwise the binaries are built with `go build`
// from the pinned tools module into the cache directory, keyed by version; concurrent callers
// (parallel test packages) wait on a file lock for one build. Progress goes to progress.
func EnsureBinaries(ctx context.Context, progress io.Writer) (Binaries, error) {
	if assets := os.Getenv("KUBEBUILDER_ASSETS"); assets != "" {
		b := Binaries{
			Etcd:                  filepath.Join(assets, "etcd"),
			KubeAPIServer:         filepath.Join(assets, "kube-apiserver"),
			KubeControllerManager: filepath.Join(assets, "kube-controller-manager"),
		}
		if err := allExecutable(b.Etcd, b.KubeAPIServer); err != nil {
			return Binaries{}, fmt.Errorf("KUBEBUILDER_ASSETS=%s: %w", assets, err)
		}
		if allExecutable(b.KubeControllerManager) != nil {
			b.KubeControllerManager = ""
		}
		return b, nil
	}
	cache, err := CacheDir()
	if err != nil {
		return Binaries{}, err
	}
	dir := filepath.Join(cache, binaryKey())
	b := Binaries{
		Etcd:                  filepath.Join(dir, "bin", "etcd"),
		KubeAPIServer:         filepath.Join(dir, "bin", "kube-apiserver"),
		KubeControllerManager: filepath.Join(dir, "bin", "kube-controller-manager"),
	}
	if allExecutable(b.Etcd, b.KubeAPIServer, b.KubeControllerManager) == nil {
		return b, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Binaries{}, err
	}
	unlock, err := flock.Lock(ctx, filepath.Join(dir, "build.lock"), func() {
		fmt.Fprintln(progress, "lab: another process is building the control-plane binaries; waiting for it")
	})
	if err != nil {
		return Binaries{}, err
	}
	defer unlock()
	// Another process may have finished the build while we waited for the lock.
	if allExecutable(b.Etcd, b.KubeAPIServer, b.KubeControllerManager) == nil {
		return b, nil
	}
	if err := build(ctx, dir, progress); err != nil {
		return Binaries{}, err
	}
	return b, allExecutable(b.Etcd, b.KubeAPIServer, b.KubeControllerManager)
}

func allExecutable(paths ...string) error {
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			return fmt.Errorf("%s is not an executable file", p)
		}
	}
	return nil
}

// build compiles the binaries into dir/bin, going through a scratch directory and a rename
// so an interrupted build never leaves a half-written binary in place.
func build(ctx context.Context, dir string, progress io.Writer) error {
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), toolsGoMod, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "go.sum"), toolsGoSum, 0o644); err != nil {
		return err
	}
	scratch, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)

	minor := strings.Split(strings.TrimPrefix(KubernetesVersion, "v"), ".")[1]
	ldflags := strings.Join([]string{"-s", "-w",
		"-X k8s.io/component-base/version.gitVersion=" + KubernetesVersion,
		"-X k8s.io/component-base/version.gitMajor=1",
		"-X k8s.io/component-base/version.gitMinor=" + minor,
		"-X k8s.io/client-go/pkg/version.gitVersion=" + KubernetesVersion,
		"-X k8s.io/client-go/pkg/version.gitMajor=1",
		"-X k8s.io/client-go/pkg/version.gitMinor=" + minor,
	}, " ")
	fmt.Fprintf(progress, "lab: building etcd %s, kube-apiserver and kube-controller-manager %s from source into %s\n",
		EtcdVersion, KubernetesVersion, dir)
	fmt.Fprintln(progress, "lab: this happens once per version and takes about 5-6 minutes on 2 cores; later starts take seconds")

	start := time.Now()
	for _, bin := range binaryPackages {
		args := []string{"build", "-trimpath", "-ldflags", ldflags, "-o", filepath.Join(scratch, bin.name), bin.pkg}
		if err := runWithProgress(ctx, src, progress, "lab: building "+bin.name, start, "go", args...); err != nil {
			return fmt.Errorf("building %s: %w", bin.name, err)
		}
	}
	bin := filepath.Join(dir, "bin")
	_ = os.RemoveAll(bin)
	if err := os.Rename(scratch, bin); err != nil {
		return err
	}
	fmt.Fprintf(progress, "lab: control-plane binaries ready after %s\n", time.Since(start).Round(time.Second))
	return nil
}

// runWithProgress runs a command, printing a line every 20 seconds so a long build is never silent.
func runWithProgress(ctx context.Context, dir string, progress io.Writer, what string, since time.Time, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOWORK=off", "CGO_ENABLED=0")
	cmd.SysProcAttr = childAttrs()
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return err
	}
	fmt.Fprintf(progress, "%s...\n", what)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(20 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("%w\n%s", err, out.String())
			}
			return nil
		case <-tick.C:
			fmt.Fprintf(progress, "%s... (%s elapsed)\n", what, time.Since(since).Round(time.Second))
		}
	}
}
