package gcp

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	mapiv1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
	ct "github.com/machina-dev/machina/internal/convert/converttest"
)

const roleLabel = convert.MachineAPIRoleLabel

func roleContext(tag string) convert.Context {
	c := testCtx
	p := testPlatform
	p.ControlPlaneGroupTag = tag
	c.Platform = p
	return c
}

func mapiMachine(t *testing.T, labels map[string]string) *mapiv1.Machine {
	t.Helper()
	b, err := json.Marshal(installerSpec())
	if err != nil {
		t.Fatal(err)
	}
	labels[convert.MachineAPIClusterLabel] = cluster
	return &mapiv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "openshift-machine-api", Labels: labels},
		Spec:       mapiv1.MachineSpec{ProviderSpec: mapiv1.ProviderSpec{Value: &runtime.RawExtension{Raw: b}}},
	}
}

// capiMachine is the installer's worker converted to the Cluster API, with labels.
func capiMachine(t *testing.T, labels map[string]string) (*clusterv1.Machine, client.Object) {
	t.Helper()
	out, _, errs := convert.ToClusterAPIMachine(mapiMachine(t, map[string]string{}), roleContext("master"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	out.Machine.Labels = labels
	out.Machine.Labels[convert.ClusterAPIClusterLabel] = cluster
	out.Machine.Labels[convert.MachineAPIClusterLabel] = cluster
	return out.Machine, out.InfraMachine
}

// TestControlPlaneRole: role master and the control-plane label convert into each other when the
// GCPCluster puts control-plane Machines in the installer's instance groups, are refused (naming
// the label) when it does not, and convert with a warning when the GCPCluster is not known.
func TestControlPlaneRole(t *testing.T) {
	master := func() map[string]string { return map[string]string{roleLabel: "master"} }
	for _, tc := range []struct {
		name, tag  string
		labels     map[string]string
		wantErrors []string
		wantCP     bool
		warns      bool
	}{
		{"master converts", "master", master(), nil, true, false},
		{"worker stays a worker", "master", map[string]string{roleLabel: "worker"}, nil, false, false},
		{"CAPG's own groups refuse a master", "apiserver", master(), []string{"metadata.labels[" + roleLabel + "]"}, false, false},
		{"a label the actuator ignores", "master", map[string]string{roleLabel: "worker", clusterv1.MachineControlPlaneLabel: ""}, []string{"metadata.labels[" + clusterv1.MachineControlPlaneLabel + "]"}, false, false},
		{"without the GCPCluster", "", master(), nil, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, w, errs := convert.ToClusterAPIMachine(mapiMachine(t, tc.labels), roleContext(tc.tag))
			if got := ct.Fields(errs); !slices.Equal(got, tc.wantErrors) {
				t.Fatalf("errors on %v, want %v: %v", got, tc.wantErrors, errs)
			}
			if tc.wantErrors != nil {
				if !strings.Contains(errs[0].Detail, "apiServerInstanceGroupTagOverride") && !strings.Contains(errs[0].Detail, "role") {
					t.Errorf("refusal does not say why: %v", errs[0].Detail)
				}
				return
			}
			if _, cp := out.Machine.Labels[clusterv1.MachineControlPlaneLabel]; cp != tc.wantCP {
				t.Errorf("control-plane label %v, want %v", cp, tc.wantCP)
			}
			warned := slices.ContainsFunc(w, func(w convert.Warning) bool { return strings.Contains(w.Detail, "GCPCluster is not known") })
			if warned != tc.warns {
				t.Errorf("warning about the unknown GCPCluster: %v, want %v (%v)", warned, tc.warns, w)
			}
		})
	}
}

// TestControlPlaneRoleToMachineAPI is the reverse direction.
func TestControlPlaneRoleToMachineAPI(t *testing.T) {
	cp := clusterv1.MachineControlPlaneLabel
	for _, tc := range []struct {
		name, tag  string
		labels     map[string]string
		wantErrors []string
		wantRole   string
	}{
		{"control plane becomes master", "master", map[string]string{cp: "", roleLabel: "master"}, nil, "master"},
		{"a Cluster API-born control-plane Machine gets the role", "master", map[string]string{cp: ""}, nil, "master"},
		{"refused with CAPG's own groups", "apiserver", map[string]string{cp: ""}, []string{"Machine.metadata.labels[" + cp + "]"}, ""},
		{"master without the label", "master", map[string]string{roleLabel: "master"}, []string{"Machine.metadata.labels[" + roleLabel + "]"}, ""},
		{"control plane of another role", "master", map[string]string{cp: "", roleLabel: "infra"}, []string{"Machine.metadata.labels[" + roleLabel + "]"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, im := capiMachine(t, tc.labels)
			out, _, errs := convert.ToMachineAPIMachine(m, im, roleContext(tc.tag))
			if got := ct.Fields(errs); !slices.Equal(got, tc.wantErrors) {
				t.Fatalf("errors on %v, want %v: %v", got, tc.wantErrors, errs)
			}
			if tc.wantErrors != nil {
				return
			}
			if _, ok := out.Labels[cp]; ok || out.Labels[roleLabel] != tc.wantRole {
				t.Errorf("labels %v, want role %q and no %s", out.Labels, tc.wantRole, cp)
			}
		})
	}
}
