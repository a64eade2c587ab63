package lab

import (
	"context"
	_ "embed"
	"io"
	"path/filepath"
	"time"
)

// ClusterctlVersion is the upstream clusterctl tests build; it must be the
// sigs.k8s.io/cluster-api version machina's go.mod pins (a test checks).
const ClusterctlVersion = "v1.14.2"

// clusterctl and the core controllers (capicore.go) are built from one module of their own:
// their dependencies are not machina's.
var (
	//go:embed clusterapimod/go.mod.txt
	clusterAPIGoMod []byte
	//go:embed clusterapimod/go.sum.txt
	clusterAPIGoSum []byte
)

// clusterctlBuild builds clusterctl.
var clusterctlBuild = moduleBuild{
	what:     "clusterctl " + ClusterctlVersion,
	version:  "clusterctl-" + ClusterctlVersion,
	goMod:    clusterAPIGoMod,
	goSum:    clusterAPIGoSum,
	out:      "bin",
	estimate: "this happens once per version",
	complete: func(dir string) error { return allExecutable(filepath.Join(dir, "clusterctl")) },
	build: func(ctx context.Context, src, scratch string, start time.Time, progress io.Writer) error {
		ldflags := "-s -w -X sigs.k8s.io/cluster-api/version.gitVersion=" + ClusterctlVersion
		return goBuild(ctx, "clusterctl", src, "sigs.k8s.io/cluster-api/cmd/clusterctl", filepath.Join(scratch, "clusterctl"), ldflags, start, progress)
	},
}

// EnsureClusterctl returns the path of the upstream clusterctl binary, building it from the
// pinned module into the cache directory on first use (one build per version; concurrent
// callers wait on a file lock). Progress goes to progress.
func EnsureClusterctl(ctx context.Context, progress io.Writer) (string, error) {
	dir, err := clusterctlBuild.ensure(ctx, progress)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "clusterctl"), nil
}
