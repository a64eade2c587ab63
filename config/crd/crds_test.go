package crd_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/machina-dev/machina/config/crd"
	"github.com/machina-dev/machina/internal/crdsync"
)

// The checked-in upstream CRDs must be byte-for-byte the ones in the modules go.mod pins.
func TestUpstreamCRDsMatchPinnedModules(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	drifted, err := crdsync.Sync(root, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(drifted) > 0 {
		t.Fatalf("config/crd/upstream drifted from the pinned modules (run `make crds`):\n  %s",
			strings.Join(drifted, "\n  "))
	}
}

func TestAllCRDsDecode(t *testing.T) {
	crds, err := crd.All()
	if err != nil {
		t.Fatal(err)
	}
	groups := map[string]int{}
	for _, c := range crds {
		groups[c.Spec.Group]++
	}
	want := map[string]int{"machine.openshift.io": 4, "cluster.x-k8s.io": 8, "config.openshift.io": 4, "infrastructure.machina.dev": 4}
	for g, n := range want {
		if groups[g] != n {
			t.Errorf("group %s: %d CRDs, want %d", g, groups[g], n)
		}
	}
	for _, c := range crds {
		if c.Spec.Group != "infrastructure.machina.dev" {
			continue
		}
		if c.Labels["cluster.x-k8s.io/v1beta2"] != "v1alpha1" {
			t.Errorf("%s lacks the Cluster API contract label", c.Name)
		}
		if len(c.Spec.Names.ShortNames) == 0 || len(c.Spec.Versions[0].AdditionalPrinterColumns) == 0 {
			t.Errorf("%s has no short name or printer columns", c.Name)
		}
	}
}

// The simulated provider's generated CRDs and deepcopy must match the API types.
func TestSimCRDsUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs controller-gen")
	}
	root, _ := filepath.Abs("../..")
	out := t.TempDir()
	cmd := exec.Command("go", "run", "sigs.k8s.io/controller-tools/cmd/controller-gen@"+controllerGenVersion,
		"crd:crdVersions=v1", "paths=./api/...", "output:crd:artifacts:config="+out)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen: %v\n%s", err, b)
	}
	diff := exec.Command("diff", "-r", out, filepath.Join(root, "config", "crd", "sim"))
	if b, err := diff.CombinedOutput(); err != nil {
		t.Fatalf("config/crd/sim is stale (run `make generate`):\n%s", b)
	}
}
