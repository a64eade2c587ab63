package lab

import (
	"path/filepath"
	"testing"
)

// The CRDs StartCAPICore adds for the upstream core manager come from the pinned
// sigs.k8s.io/cluster-api module; a version bump that moves or drops one fails here rather
// than in a benchmark run.
func TestCAPICoreExtraCRDsAreInTheModule(t *testing.T) {
	dir, err := ModuleDir("sigs.k8s.io/cluster-api/util")
	if err != nil {
		t.Fatal(err)
	}
	crds, err := ModuleCRDs(filepath.Join(dir, "core"), capiCoreExtraKinds...)
	if err != nil {
		t.Fatal(err)
	}
	for i, crd := range crds {
		if crd.Spec.Names.Kind != capiCoreExtraKinds[i].Kind || crd.Spec.Group != capiCoreExtraKinds[i].Group {
			t.Errorf("CRD %d is %s in %s, want %v", i, crd.Spec.Names.Kind, crd.Spec.Group, capiCoreExtraKinds[i])
		}
	}
}
