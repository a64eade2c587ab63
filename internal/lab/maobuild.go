package lab

import (
	"context"
	_ "embed"
	"io"
	"os"
	"path/filepath"
	"time"
)

// MAOVersion is the machine-api-operator revision the lab builds its Machine API controllers
// from. The module proxy serves it though the repository tags no releases: it is a
// pseudo-version, asked for exactly.
const MAOVersion = "v0.2.1-0.20260226113419-88465550a74b"

// maoModule is machine-api-operator's module path.
const maoModule = "github.com/openshift/machine-api-operator"

// The lab builds the controllers from this module, separate from machina's own and from the
// other embedded modules: machine-api-operator pins its own Kubernetes, controller-runtime and
// openshift/api. Refresh with `make mao-mod`.
var (
	//go:embed maomod/go.mod.txt
	maoGoMod []byte
	//go:embed maomod/go.sum.txt
	maoGoSum []byte
)

// The commands of machine-api-operator the lab runs: the provider-independent programs of
// OpenShift's machine-api-controllers Deployment. The Machine controller is not among them:
// it is built into each provider's own program, and the lab has none.
const (
	MAOMachineSet         = "machineset"
	MAOMachineHealthCheck = "machine-healthcheck"
	MAONodeLink           = "nodelink-controller"
)

// maoCommands are the commands in the order StartMAO starts them; each is built from
// <maoModule>/cmd/<name> into an executable of that name.
var maoCommands = []string{MAOMachineSet, MAOMachineHealthCheck, MAONodeLink}

// The files of the build's directory besides the executables: machine-api-operator's RBAC
// manifest, and the config.openshift.io DNS CRD of the openshift/api its build resolves (its
// machineset command reads the cluster's DNS when it starts; machina does not serve the kind).
const (
	maoRBACManifest = "install/0000_30_machine-api-operator_09_rbac.yaml"
	maoDNSCRD       = "crds/dnses.yaml"
	// dnsCRDSource is the DNS CRD's path in the openshift/api module.
	dnsCRDSource = "config/v1/zz_generated.crd-manifests/0000_10_config-operator_01_dnses.crd.yaml"
)

// MAOBuild is a built set of machine-api-operator controllers and the manifests StartMAO reads.
type MAOBuild struct {
	// Dir holds the executables (named as the MAO* command constants) and the manifests.
	Dir string
}

// Command is the path of the executable of command name (MAOMachineSet, ...).
func (b MAOBuild) Command(name string) string { return filepath.Join(b.Dir, name) }

// maoBuild builds the three commands and copies the manifests next to them.
var maoBuild = moduleBuild{
	what:     "machine-api-operator " + MAOVersion + " (machineset, machine-healthcheck, nodelink-controller)",
	version:  "mao-" + MAOVersion,
	goMod:    maoGoMod,
	goSum:    maoGoSum,
	out:      "dist",
	estimate: "this happens once per version and takes about 6 minutes on 2 cores; later starts take seconds",
	complete: maoComplete,
	build: func(ctx context.Context, src, scratch string, start time.Time, progress io.Writer) error {
		// What machine-api-operator's hack/go-build.sh stamps, so the programs report their version.
		ldflags := "-s -w -X " + maoModule + "/pkg/version.Raw=" + MAOVersion
		for _, name := range maoCommands {
			pkg := maoModule + "/cmd/" + name
			if err := goBuild(ctx, name, src, pkg, filepath.Join(scratch, name), ldflags, start, progress); err != nil {
				return err
			}
		}
		return copyMAOManifests(ctx, src, scratch)
	},
}

// EnsureMAO returns machine-api-operator's controllers, building them on first use with
// `go build` from the pinned module into the cache directory (CacheDir), keyed by version and
// module digest. Concurrent callers wait on a file lock for one build. Progress goes to
// progress. The build needs Go and the module proxy (or a filled module cache).
func EnsureMAO(ctx context.Context, progress io.Writer) (MAOBuild, error) {
	dist, err := maoBuild.ensure(ctx, progress)
	if err != nil {
		return MAOBuild{}, err
	}
	return MAOBuild{Dir: dist}, nil
}

// maoComplete checks that a build left every executable and manifest in dist.
func maoComplete(dist string) error {
	b := MAOBuild{Dir: dist}
	for _, name := range maoCommands {
		if err := allExecutable(b.Command(name)); err != nil {
			return err
		}
	}
	for _, f := range []string{maoRBACManifest, maoDNSCRD} {
		if _, err := os.Stat(filepath.Join(dist, f)); err != nil {
			return err
		}
	}
	return nil
}

// copyMAOManifests copies the RBAC manifest from machine-api-operator's module and the DNS CRD
// from the openshift/api module of the same build (both in the module cache once the build
// resolved them) into dst.
func copyMAOManifests(ctx context.Context, src, dst string) error {
	maoDir, err := goListModuleDir(ctx, src, maoModule)
	if err != nil {
		return err
	}
	apiDir, err := goListModuleDir(ctx, src, "github.com/openshift/api")
	if err != nil {
		return err
	}
	if err := copyFile(filepath.Join(maoDir, maoRBACManifest), filepath.Join(dst, maoRBACManifest)); err != nil {
		return err
	}
	return copyFile(filepath.Join(apiDir, dnsCRDSource), filepath.Join(dst, maoDNSCRD))
}
