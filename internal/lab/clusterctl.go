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
var clusterctlBuild = clusterAPIProgram("clusterctl "+ClusterctlVersion, "clusterctl", "clusterctl", "sigs.k8s.io/cluster-api/cmd/clusterctl")

// clusterAPIProgram builds the program of package pkg of the pinned Cluster API module into
// the cache entry "<key>-<version>-<digest>/bin/<bin>"; what names it in progress lines.
func clusterAPIProgram(what, key, bin, pkg string) moduleBuild {
	return moduleBuild{
		what:     what,
		version:  key + "-" + ClusterctlVersion,
		goMod:    clusterAPIGoMod,
		goSum:    clusterAPIGoSum,
		out:      "bin",
		estimate: "this happens once per version",
		complete: func(dir string) error { return allExecutable(filepath.Join(dir, bin)) },
		build: func(ctx context.Context, src, scratch string, start time.Time, progress io.Writer) error {
			ldflags := "-s -w -X sigs.k8s.io/cluster-api/version.gitVersion=" + ClusterctlVersion
			return goBuild(ctx, bin, src, pkg, filepath.Join(scratch, bin), ldflags, start, progress)
		},
	}
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
