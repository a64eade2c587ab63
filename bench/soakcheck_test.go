package main

import (
	"fmt"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// A pair left with its authoritative Cluster API copy paused has no active side: the settled
// check names it, and leaves alone a paused copy that mirrors the Machine API.
func TestSettledActiveFindsBothSidesPaused(t *testing.T) {
	set := func(name string, auth machinev1beta1.MachineAuthority) *machinev1beta1.MachineSet {
		ms := &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name}}
		ms.Status.AuthoritativeAPI = auth
		return ms
	}
	paused := func(name string) *clusterv1.MachineSet {
		return &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{clusterv1.PausedAnnotation: ""}}}
	}
	s := &snapshot{
		mapiS: map[string]*machinev1beta1.MachineSet{
			"stuck":  set("stuck", machinev1beta1.MachineAuthorityClusterAPI),
			"mirror": set("mirror", machinev1beta1.MachineAuthorityMachineAPI),
			"active": set("active", machinev1beta1.MachineAuthorityClusterAPI),
		},
		capiS2: map[string]*clusterv1.MachineSet{
			"stuck":  paused("stuck"),
			"mirror": paused("mirror"),
			"active": {ObjectMeta: metav1.ObjectMeta{Name: "active"}},
		},
	}
	c := &checker{rep: newSoakReport()}
	var got []string
	c.settledActive(s, func(inv, format string, args ...any) {
		got = append(got, inv+": "+fmt.Sprintf(format, args...))
	})
	want := invActive + ": MachineSet stuck: status authority ClusterAPI while its Cluster API copy is paused: neither side acts"
	if len(got) != 1 || got[0] != want {
		t.Fatalf("got %q, want only %q", got, want)
	}
}
