package lab_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/machina-dev/machina/internal/lab"
)

// TestModuleCRDsInlinePatchLabels: CAPIBM declares its PowerVS CRDs' Cluster API v1beta2
// contract version with an inline patch whose target names them by regular expression, and
// its v1beta1 one for every CRD with a labels entry; ModuleCRDs gives a PowerVS CRD both, and
// a VPC CRD (which the target does not match) only the latter.
func TestModuleCRDsInlinePatchLabels(t *testing.T) {
	dir, err := lab.ModuleDir("sigs.k8s.io/cluster-api-provider-ibmcloud/api/powervs/v1beta3")
	if err != nil {
		t.Fatal(err)
	}
	const group = "infrastructure.cluster.x-k8s.io"
	crds, err := lab.ModuleCRDs(dir, schema.GroupKind{Group: group, Kind: "IBMPowerVSMachine"}, schema.GroupKind{Group: group, Kind: "IBMVPCMachine"})
	if err != nil {
		t.Fatal(err)
	}
	if l := crds[0].Labels; l["cluster.x-k8s.io/v1beta2"] != "v1beta3" || l["cluster.x-k8s.io/v1beta1"] != "v1beta2" {
		t.Errorf("%s labels %v", crds[0].Name, l)
	}
	if l := crds[1].Labels; l["cluster.x-k8s.io/v1beta2"] != "" || l["cluster.x-k8s.io/v1beta1"] != "v1beta2" {
		t.Errorf("%s labels %v", crds[1].Name, l)
	}
}

// TestModuleCRDsDefaultDir: CAPV keeps its CRDs in config/default/crd, whose kustomization
// gives them both contract labels.
func TestModuleCRDsDefaultDir(t *testing.T) {
	dir, err := lab.ModuleDir("sigs.k8s.io/cluster-api-provider-vsphere/api/govmomi/v1beta2")
	if err != nil {
		t.Fatal(err)
	}
	crds, err := lab.ModuleCRDs(dir, schema.GroupKind{Group: "infrastructure.cluster.x-k8s.io", Kind: "VSphereMachine"})
	if err != nil {
		t.Fatal(err)
	}
	if l := crds[0].Labels; l["cluster.x-k8s.io/v1beta2"] != "v1beta2" || l["cluster.x-k8s.io/v1beta1"] != "v1beta1" {
		t.Errorf("%s labels %v", crds[0].Name, l)
	}
}
