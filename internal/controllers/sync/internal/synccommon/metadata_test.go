package synccommon

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

func TestMirrorMetadata(t *testing.T) {
	m := &clusterv1.Machine{}
	// Created as a mirror: the record lists what came from the authoritative copy.
	m.Labels = map[string]string{"team": "blue", "tier": "web"}
	m.Annotations = map[string]string{"note": "x", clusterv1.PausedAnnotation: "", SyncedLabelsAnnotation: "stale"}
	MarkMirrored(m)
	if !reflect.DeepEqual(m.Labels, map[string]string{"team": "blue", "tier": "web"}) {
		t.Fatalf("labels %v", m.Labels)
	}
	wantA := map[string]string{"note": "x", SyncedLabelsAnnotation: "team,tier", SyncedAnnotationsAnnotation: "note"}
	if !reflect.DeepEqual(m.Annotations, wantA) {
		t.Fatalf("annotations %v, want %v", m.Annotations, wantA)
	}

	// Others add keys; the sync's own paused annotation is set separately.
	m.Labels["cluster.x-k8s.io/set-name"] = "workers"
	m.Annotations["other"] = "y"
	m.Annotations[clusterv1.PausedAnnotation] = ""

	// The authoritative copy drops tier and note, changes team, adds zone.
	MirrorMetadata(m, map[string]string{"team": "red", "zone": "a"}, map[string]string{clusterv1.PausedAnnotation: "", "new": "z"})
	wantL := map[string]string{"team": "red", "zone": "a", "cluster.x-k8s.io/set-name": "workers"}
	if !reflect.DeepEqual(m.Labels, wantL) {
		t.Fatalf("labels %v, want %v", m.Labels, wantL)
	}
	wantA = map[string]string{"other": "y", "new": "z", clusterv1.PausedAnnotation: "",
		SyncedLabelsAnnotation: "team,zone", SyncedAnnotationsAnnotation: "new"}
	if !reflect.DeepEqual(m.Annotations, wantA) {
		t.Fatalf("annotations %v, want %v", m.Annotations, wantA)
	}

	// Running again with the same input changes nothing (no write).
	before := m.ObjectMeta.DeepCopy()
	MirrorMetadata(m, map[string]string{"team": "red", "zone": "a"}, map[string]string{"new": "z"})
	if !reflect.DeepEqual(*before, m.ObjectMeta) {
		t.Fatalf("second pass changed %v to %v", before, m.ObjectMeta)
	}

	// Nothing left to copy: the record goes, the other parties' keys stay.
	MirrorMetadata(m, nil, nil)
	if !reflect.DeepEqual(m.Labels, map[string]string{"cluster.x-k8s.io/set-name": "workers"}) ||
		!reflect.DeepEqual(m.Annotations, map[string]string{"other": "y", clusterv1.PausedAnnotation: ""}) {
		t.Fatalf("after emptying: %v %v", m.Labels, m.Annotations)
	}

	// An object with nothing stays without maps.
	var empty metav1.ObjectMeta
	e := &clusterv1.Machine{ObjectMeta: empty}
	MirrorMetadata(e, nil, nil)
	if e.Labels != nil || e.Annotations != nil {
		t.Fatalf("empty object got %v %v", e.Labels, e.Annotations)
	}
}
