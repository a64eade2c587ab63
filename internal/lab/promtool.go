package lab

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// PrometheusVersion is the github.com/prometheus/prometheus module whose promtool checks the
// shipped alerting rules (config/prometheus). The module's versions are v0.MAJORMINOR.PATCH:
// v0.316.0 is Prometheus 3.16.0. The embedded module must pin it (a test checks).
const PrometheusVersion = "v0.316.0"

// prometheusModule is the module promtool is built from.
const prometheusModule = "github.com/prometheus/prometheus"

// promtool is built from a module of its own: its dependencies are not machina's.
var (
	//go:embed prometheusmod/go.mod.txt
	prometheusGoMod []byte
	//go:embed prometheusmod/go.sum.txt
	prometheusGoSum []byte
)

// promtoolBuild builds promtool into the cache entry "promtool-<version>-<digest>/bin".
var promtoolBuild = moduleBuild{
	what:     "promtool " + PrometheusVersion,
	version:  "promtool-" + PrometheusVersion,
	goMod:    prometheusGoMod,
	goSum:    prometheusGoSum,
	out:      "bin",
	estimate: "this takes a few minutes and happens once per version",
	complete: func(dir string) error { return allExecutable(filepath.Join(dir, "promtool")) },
	build: func(ctx context.Context, src, scratch string, start time.Time, progress io.Writer) error {
		ldflags := "-s -w -X github.com/prometheus/common/version.Version=" + PrometheusRelease()
		return goBuild(ctx, "promtool", src, prometheusModule+"/cmd/promtool", filepath.Join(scratch, "promtool"), ldflags, start, progress)
	},
}

// PrometheusRelease is the Prometheus release of PrometheusVersion ("3.16.0" for v0.316.0),
// which the built promtool reports as its version.
func PrometheusRelease() string { return prometheusRelease(PrometheusVersion) }

// prometheusRelease maps a module version v0.MAJORMINOR.PATCH to MAJOR.MINOR.PATCH.
func prometheusRelease(module string) string {
	majorMinor, patch, _ := strings.Cut(strings.TrimPrefix(module, "v0."), ".")
	n, _ := strconv.Atoi(majorMinor)
	return fmt.Sprintf("%d.%d.%s", n/100, n%100, patch)
}

// EnsurePromtool returns the path of the upstream promtool, building it from the pinned
// module into the cache directory on first use (one build per version; concurrent callers
// wait on a file lock). Progress goes to progress.
func EnsurePromtool(ctx context.Context, progress io.Writer) (string, error) {
	dir, err := promtoolBuild.ensure(ctx, progress)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "promtool"), nil
}
