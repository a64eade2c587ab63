package migration

import (
	"strings"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/gate"
)

// A MachineHealthCheck's authority and synchronisation live in annotations: the subject
// reads them like the status fields of a Machine, and refuses to start while the recorded
// synchronised generation is not the authoritative copy's current one.
func TestMHCSubjectReadsAnnotations(t *testing.T) {
	mapi := &machinev1beta1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Generation: 4, Annotations: map[string]string{
		authority.MHCAuthoritativeAPIAnnotation:       "ClusterAPI",
		authority.MHCStatusAuthoritativeAPIAnnotation: "Migrating",
		authority.MHCSynchronizedAPIAnnotation:        "MachineAPI",
		authority.MHCSynchronizedGenerationAnnotation: "3",
	}}}
	mapi.Status.Conditions = []machinev1beta1.Condition{{Type: authority.SynchronizedCondition, Status: corev1.ConditionTrue}}
	capi := &clusterv1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Generation: 7}}
	s := &mhcSubject{mapi: mapi, capi: capi}

	if req, cur, prev := s.authorities(); req != "ClusterAPI" || cur != "Migrating" || prev != "MachineAPI" {
		t.Fatalf("authorities %q %q %q", req, cur, prev)
	}
	// Migrating from the Machine API: its generation (4) counts, and 3 was synchronised.
	if ok, why := s.synchronized(); ok || !strings.Contains(why, "synchronizedGeneration is 3") || !strings.Contains(why, "generation 4") {
		t.Fatalf("stale generation accepted: %v %q", ok, why)
	}
	mapi.Annotations[authority.MHCSynchronizedGenerationAnnotation] = "4"
	if ok, why := s.synchronized(); !ok {
		t.Fatalf("synchronised at the current generation refused: %q", why)
	}
	// From the Cluster API the Cluster API copy's generation counts.
	mapi.Annotations[authority.MHCSynchronizedAPIAnnotation] = "ClusterAPI"
	if ok, _ := s.synchronized(); ok {
		t.Fatal("the Machine API generation was compared while the Cluster API is the old authority")
	}
	mapi.Annotations[authority.MHCSynchronizedGenerationAnnotation] = "not-a-number"
	if ok, _ := s.synchronized(); ok {
		t.Fatal("an unreadable synchronised generation was accepted")
	}
	// Synchronized=False refuses whatever the generation.
	mapi.Annotations[authority.MHCSynchronizedGenerationAnnotation] = "7"
	mapi.Status.Conditions[0].Status, mapi.Status.Conditions[0].Message = corev1.ConditionFalse, "spec.x: bad"
	if ok, why := s.synchronized(); ok || !strings.Contains(why, "spec.x: bad") {
		t.Fatalf("Synchronized=False accepted: %v %q", ok, why)
	}

	// Paused: the Machine API side through its Paused condition, the Cluster API side through
	// its Paused condition at the copy's generation.
	if ok, _ := s.paused(machinev1beta1.MachineAuthorityMachineAPI); ok {
		t.Fatal("Machine API side paused without a Paused condition")
	}
	mapi.Status.Conditions = append(mapi.Status.Conditions, machinev1beta1.Condition{Type: gate.PausedCondition, Status: corev1.ConditionTrue})
	if ok, _ := s.paused(machinev1beta1.MachineAuthorityMachineAPI); !ok {
		t.Fatal("Machine API side Paused=True not seen")
	}
	capi.Status.Conditions = []metav1.Condition{{Type: clusterv1.PausedCondition, Status: metav1.ConditionTrue, ObservedGeneration: 6}}
	if ok, _ := s.paused(machinev1beta1.MachineAuthorityClusterAPI); ok {
		t.Fatal("a Paused=True of an older generation was accepted")
	}
	capi.Status.Conditions[0].ObservedGeneration = 7
	if ok, _ := s.paused(machinev1beta1.MachineAuthorityClusterAPI); !ok {
		t.Fatal("Cluster API side Paused=True not seen")
	}
}
