// Package crdsync copies the upstream CRD manifests machina installs out of the pinned Go
// modules into config/crd/upstream, and checks that the checked-in copies have not drifted.
//
// The modules are located with `go list -m -json`, so the versions are exactly the ones the
// main module's go.mod pins.
package crdsync

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Source is one CRD manifest taken from a module.
type Source struct {
	Module string // module path, resolved at the version go.mod pins
	Path   string // file inside the module
	Dest   string // file under config/crd/upstream
	// LabelsFrom, when set, is a kustomization.yaml inside the module whose commonLabels the
	// provider's own release adds to the CRD (CAPA marks the Cluster API contract that way);
	// they are added to metadata.labels, the rest of the file stays byte-for-byte.
	LabelsFrom string
}

// Sources lists every upstream CRD machina installs.
//
// Where openshift/api ships a CRD per feature set, the Default variant is taken, except for
// machines and machinesets, where the TechPreviewNoUpgrade variant is the one that carries
// spec/status.authoritativeAPI and status.synchronizedGeneration, which the migration needs.
var Sources = []Source{
	mapi("0000_10_machine-api_01_machines-TechPreviewNoUpgrade.crd.yaml", "machines.yaml"),
	mapi("0000_10_machine-api_01_machinesets-TechPreviewNoUpgrade.crd.yaml", "machinesets.yaml"),
	mapi("0000_10_machine-api_01_machinehealthchecks.crd.yaml", "machinehealthchecks.yaml"),
	// OpenShift's ControlPlaneMachineSet (machine.openshift.io/v1), the owner of control-plane
	// Machines, whose deletions the sync carries over (machinesync/delete.go).
	{Module: openshiftAPI, Path: "machine/v1/zz_generated.crd-manifests/0000_10_control-plane-machine-set_01_controlplanemachinesets-Default.crd.yaml",
		Dest: "machine.openshift.io/controlplanemachinesets.yaml"},
	ocpConfig("0000_10_config-operator_01_infrastructures-Default.crd.yaml", "infrastructures.yaml"),
	// What the sync and migration read and write of an OpenShift cluster's config API
	// (internal/ocpconfig): the FeatureGate, the ClusterVersion whose version picks the
	// FeatureGate's entry, and the ClusterOperator they report on.
	ocpConfig("0000_10_config-operator_01_featuregates.crd.yaml", "featuregates.yaml"),
	ocpConfig("0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml", "clusterversions.yaml"),
	ocpConfig("0000_00_cluster-version-operator_01_clusteroperators.crd.yaml", "clusteroperators.yaml"),
	capi("clusters"), capi("clusterclasses"), capi("machines"), capi("machinesets"),
	capi("machinedeployments"), capi("machinepools"), capi("machinehealthchecks"), capi("machinedrainrules"),
	capa("awsclusters"), capa("awsmachines"), capa("awsmachinetemplates"),
}

const (
	openshiftAPI = "github.com/openshift/api"
	clusterAPI   = "sigs.k8s.io/cluster-api"
	capaModule   = "sigs.k8s.io/cluster-api-provider-aws/v2"
)

func mapi(file, dest string) Source {
	return Source{Module: openshiftAPI, Path: "machine/v1beta1/zz_generated.crd-manifests/" + file,
		Dest: "machine.openshift.io/" + dest}
}

// ocpConfig is a config.openshift.io CRD of openshift/api.
func ocpConfig(file, dest string) Source {
	return Source{Module: openshiftAPI, Path: "config/v1/zz_generated.crd-manifests/" + file,
		Dest: "config.openshift.io/" + dest}
}

func capi(plural string) Source {
	return Source{Module: clusterAPI, Path: "core/config/crd/bases/cluster.x-k8s.io_" + plural + ".yaml",
		Dest: "cluster.x-k8s.io/" + plural + ".yaml"}
}

func capa(plural string) Source {
	return Source{Module: capaModule, Path: "config/crd/bases/infrastructure.cluster.x-k8s.io_" + plural + ".yaml",
		Dest: "infrastructure.cluster.x-k8s.io/" + plural + ".yaml", LabelsFrom: "config/crd/kustomization.yaml"}
}

// ModuleDir returns the directory of a module at the version the main module in repoRoot
// requires, downloading it into the module cache if needed.
func ModuleDir(repoRoot, module string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", module)
	cmd.Dir = repoRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %v: %s", module, err, strings.TrimSpace(stderr.String()))
	}
	var info struct{ Dir, Version, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return "", fmt.Errorf("go mod download %s: %w", module, err)
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %s", module, info.Error)
	}
	return info.Dir, nil
}

// Sync copies every source into repoRoot/config/crd/upstream. With check set it writes
// nothing and returns the list of destination files that differ from their source.
func Sync(repoRoot string, check bool) ([]string, error) {
	dirs := map[string]string{}
	var drifted []string
	for _, s := range Sources {
		dir, ok := dirs[s.Module]
		if !ok {
			d, err := ModuleDir(repoRoot, s.Module)
			if err != nil {
				return nil, err
			}
			dir, dirs[s.Module] = d, d
		}
		want, err := read(dir, s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Module, err)
		}
		dest := filepath.Join(repoRoot, "config", "crd", "upstream", s.Dest)
		have, err := os.ReadFile(dest)
		if err == nil && bytes.Equal(have, want) {
			continue
		}
		if check {
			drifted = append(drifted, s.Dest)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(dest, want, 0o644); err != nil {
			return nil, err
		}
	}
	if check {
		extra, err := unlisted(repoRoot)
		if err != nil {
			return nil, err
		}
		drifted = append(drifted, extra...)
	}
	sort.Strings(drifted)
	return drifted, nil
}

// read returns the manifest a source produces.
func read(moduleDir string, s Source) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(moduleDir, s.Path))
	if err != nil || s.LabelsFrom == "" {
		return b, err
	}
	k, err := os.ReadFile(filepath.Join(moduleDir, s.LabelsFrom))
	if err != nil {
		return nil, err
	}
	var kust struct {
		CommonLabels map[string]string `json:"commonLabels"`
	}
	if err := yaml.Unmarshal(k, &kust); err != nil {
		return nil, fmt.Errorf("%s: %w", s.LabelsFrom, err)
	}
	return AddLabels(b, kust.CommonLabels)
}

// AddLabels inserts labels (sorted) as metadata.labels of a single-object YAML manifest that
// has none, leaving every other byte as it is.
func AddLabels(manifest []byte, labels map[string]string) ([]byte, error) {
	const meta = "\nmetadata:\n"
	i := bytes.Index(manifest, []byte(meta))
	if i < 0 {
		return nil, fmt.Errorf("no top-level metadata")
	}
	if bytes.Contains(manifest, []byte(meta+"  labels:")) {
		return nil, fmt.Errorf("metadata.labels already present")
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var block bytes.Buffer
	block.WriteString("  labels:\n")
	for _, k := range keys {
		fmt.Fprintf(&block, "    %s: %s\n", k, labels[k])
	}
	at := i + len(meta)
	out := append(append(append([]byte{}, manifest[:at]...), block.Bytes()...), manifest[at:]...)
	return out, nil
}

// unlisted finds files under config/crd/upstream that no source produces.
func unlisted(repoRoot string) ([]string, error) {
	known := map[string]bool{}
	for _, s := range Sources {
		known[filepath.ToSlash(s.Dest)] = true
	}
	base := filepath.Join(repoRoot, "config", "crd", "upstream")
	var extra []string
	err := filepath.WalkDir(base, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		rel, _ := filepath.Rel(base, p)
		if rel == "kustomization.yaml" { // lists the CRDs for kubectl apply -k
			return nil
		}
		if !known[filepath.ToSlash(rel)] {
			extra = append(extra, filepath.ToSlash(rel)+" (not from any pinned module)")
		}
		return nil
	})
	return extra, err
}
