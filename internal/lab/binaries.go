package lab

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
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

// controlPlaneBuild builds etcd, kube-apiserver and kube-controller-manager.
var controlPlaneBuild = moduleBuild{
	what:     "etcd " + EtcdVersion + ", kube-apiserver and kube-controller-manager " + KubernetesVersion,
	version:  "kube-" + KubernetesVersion + "-etcd-" + EtcdVersion,
	goMod:    toolsGoMod,
	goSum:    toolsGoSum,
	out:      "bin",
	estimate: "this happens once per version and takes about 5-6 minutes on 2 cores; later starts take seconds",
	complete: func(dir string) error {
		b := binariesIn(dir)
		return allExecutable(b.Etcd, b.KubeAPIServer, b.KubeControllerManager)
	},
	build: buildControlPlane,
}

// binariesIn names the control-plane executables in dir.
func binariesIn(dir string) Binaries {
	return Binaries{
		Etcd:                  filepath.Join(dir, "etcd"),
		KubeAPIServer:         filepath.Join(dir, "kube-apiserver"),
		KubeControllerManager: filepath.Join(dir, "kube-controller-manager"),
	}
}

// EnsureBinaries returns the control-plane binaries, building them on first use.
//
// If KUBEBUILDER_ASSETS is set, its etcd and kube-apiserver are used (and its
// kube-controller-manager when present). Otherwise the binaries are built with `go build`
// from the pinned tools module into the cache directory, keyed by version; concurrent callers
// (parallel test packages) wait on a file lock for one build. Progress goes to progress.
func EnsureBinaries(ctx context.Context, progress io.Writer) (Binaries, error) {
	if assets := os.Getenv("KUBEBUILDER_ASSETS"); assets != "" {
		b := binariesIn(assets)
		if err := allExecutable(b.Etcd, b.KubeAPIServer); err != nil {
			return Binaries{}, fmt.Errorf("KUBEBUILDER_ASSETS=%s: %w", assets, err)
		}
		if allExecutable(b.KubeControllerManager) != nil {
			b.KubeControllerManager = ""
		}
		return b, nil
	}
	dir, err := controlPlaneBuild.ensure(ctx, progress)
	if err != nil {
		return Binaries{}, err
	}
	return binariesIn(dir), nil
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

// buildControlPlane compiles the control-plane binaries from the module in src into scratch.
func buildControlPlane(ctx context.Context, src, scratch string, start time.Time, progress io.Writer) error {
	minor := strings.Split(strings.TrimPrefix(KubernetesVersion, "v"), ".")[1]
	ldflags := strings.Join([]string{"-s", "-w",
		"-X k8s.io/component-base/version.gitVersion=" + KubernetesVersion,
		"-X k8s.io/component-base/version.gitMajor=1",
		"-X k8s.io/component-base/version.gitMinor=" + minor,
		"-X k8s.io/client-go/pkg/version.gitVersion=" + KubernetesVersion,
		"-X k8s.io/client-go/pkg/version.gitMajor=1",
		"-X k8s.io/client-go/pkg/version.gitMinor=" + minor,
	}, " ")
	for _, bin := range binaryPackages {
		if err := goBuild(ctx, bin.name, src, bin.pkg, filepath.Join(scratch, bin.name), ldflags, start, progress); err != nil {
			return err
		}
	}
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
