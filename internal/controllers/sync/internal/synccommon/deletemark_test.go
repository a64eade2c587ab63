package synccommon

import (
	"maps"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// A mark put on a mirror (not in the sync's record) is the mirror's own; one the sync copied
// there is not.
func TestOwnMark(t *testing.T) {
	mirror := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		MachineAPIDeleteMarks[1]: "yes", SyncedAnnotationsAnnotation: "note"}}}
	if v, ok := OwnMark(mirror, MachineAPIDeleteMarks); !ok || v != "yes" {
		t.Fatalf("the older key put on the mirror: %q %v", v, ok)
	}
	mirror.Annotations[SyncedAnnotationsAnnotation] = "note," + MachineAPIDeleteMarks[1]
	if _, ok := OwnMark(mirror, MachineAPIDeleteMarks); ok {
		t.Fatal("a mark the sync copied onto the mirror counted as the mirror's own")
	}
}

// CarryMark sets a carried mark, removes only a carried one, and never touches the
// authoritative copy's own; DropCarried keeps a carried mark from going back to the mirror.
func TestCarryMark(t *testing.T) {
	capi := &clusterv1.Machine{}
	if !CarryMark(capi, "true", true, ClusterAPIDeleteMarks) ||
		!maps.Equal(capi.Annotations, map[string]string{clusterv1.DeleteMachineAnnotation: "true", CarriedMarkAnnotation: "true"}) {
		t.Fatalf("carried: %v", capi.Annotations)
	}
	if CarryMark(capi, "true", true, ClusterAPIDeleteMarks) {
		t.Error("carrying again changed something")
	}
	mirrored := map[string]string{clusterv1.DeleteMachineAnnotation: "true", "note": "x"}
	DropCarried(capi, mirrored, ClusterAPIDeleteMarks)
	if !maps.Equal(mirrored, map[string]string{"note": "x"}) {
		t.Errorf("a carried mark would be mirrored back: %v", mirrored)
	}
	if !CarryMark(capi, "", false, ClusterAPIDeleteMarks) || len(capi.Annotations) != 0 {
		t.Fatalf("the carried mark stayed after the mirror's went: %v", capi.Annotations)
	}

	own := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{clusterv1.DeleteMachineAnnotation: "mine"}}}
	if CarryMark(own, "true", true, ClusterAPIDeleteMarks) || CarryMark(own, "", false, ClusterAPIDeleteMarks) ||
		own.Annotations[clusterv1.DeleteMachineAnnotation] != "mine" {
		t.Errorf("the authoritative copy's own mark was touched: %v", own.Annotations)
	}
	mirrored = map[string]string{clusterv1.DeleteMachineAnnotation: "mine"}
	DropCarried(own, mirrored, ClusterAPIDeleteMarks)
	if len(mirrored) != 1 {
		t.Error("the authoritative copy's own mark is no longer mirrored")
	}
}
