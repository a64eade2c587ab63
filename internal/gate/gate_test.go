package gate_test

import (
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/mapicond"
)

func TestMachineAPIGate(t *testing.T) {
	cases := []struct {
		name          string
		spec, status  machinev1beta1.MachineAuthority
		wantPaused    bool
		wantAuthority machinev1beta1.MachineAuthority
	}{
		{"empty status defaults from empty spec", "", "", false, machinev1beta1.MachineAuthorityMachineAPI},
		{"empty status copies spec ClusterAPI", machinev1beta1.MachineAuthorityClusterAPI, "", true, machinev1beta1.MachineAuthorityClusterAPI},
		{"MachineAPI reconciles", machinev1beta1.MachineAuthorityClusterAPI, machinev1beta1.MachineAuthorityMachineAPI, false, machinev1beta1.MachineAuthorityMachineAPI},
		{"ClusterAPI pauses", "", machinev1beta1.MachineAuthorityClusterAPI, true, machinev1beta1.MachineAuthorityClusterAPI},
		{"Migrating pauses", "", machinev1beta1.MachineAuthorityMigrating, true, machinev1beta1.MachineAuthorityMigrating},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// In the namespace the sync mirrors too: the gate decides there like anywhere else.
			m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "openshift-machine-api"}}
			m.Spec.AuthoritativeAPI, m.Status.AuthoritativeAPI = tc.spec, tc.status
			d, changed, err := gate.MachineAPI(m)
			if err != nil {
				t.Fatal(err)
			}
			if d.Paused != tc.wantPaused || m.Status.AuthoritativeAPI != tc.wantAuthority || !changed {
				t.Fatalf("paused=%v status=%s changed=%v", d.Paused, m.Status.AuthoritativeAPI, changed)
			}
			c := mapicond.Get(m.Status.Conditions, gate.PausedCondition)
			wantStatus := corev1.ConditionFalse
			if tc.wantPaused {
				wantStatus = corev1.ConditionTrue
			}
			if c == nil || c.Status != wantStatus || c.Message == "" {
				t.Fatalf("Paused condition %+v, want %s with a message", c, wantStatus)
			}
			if _, changed, _ := gate.MachineAPI(m); changed {
				t.Fatal("a second pass changed the status again")
			}
		})
	}
	if _, _, err := gate.MachineAPI(&corev1.Node{}); err == nil {
		t.Fatal("a non-Machine-API object must be an error")
	}
}

func TestClusterAPIGate(t *testing.T) {
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	d, changed := gate.ClusterAPI(m, &clusterv1.Cluster{}, &m.Status.Conditions)
	if d.Paused || !changed || !meta.IsStatusConditionFalse(m.Status.Conditions, clusterv1.PausedCondition) {
		t.Fatalf("unpaused machine: %+v %v", d, m.Status.Conditions)
	}
	m.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	if d, changed := gate.ClusterAPI(m, nil, &m.Status.Conditions); !d.Paused || !changed {
		t.Fatal("annotation must pause")
	}
	c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.PausedCondition)
	if c.Status != metav1.ConditionTrue || c.ObservedGeneration != 3 || c.Reason != clusterv1.PausedReason {
		t.Fatalf("condition %+v", c)
	}
	m.Annotations = nil
	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c1"}, Spec: clusterv1.ClusterSpec{Paused: ptr.To(true)}}
	if d, _ := gate.ClusterAPI(m, cl, &m.Status.Conditions); !d.Paused || d.Message == "" {
		t.Fatal("Cluster spec.paused must pause")
	}
}
