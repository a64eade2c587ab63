package events_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/machina-dev/machina/internal/events"
)

// Eventf records through the recorder it is given and does nothing without one.
func TestEventf(t *testing.T) {
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "y"}}
	events.Eventf(nil, obj, corev1.EventTypeNormal, "Created", "made %s", "x")

	rec := record.NewFakeRecorder(1)
	events.Eventf(rec, obj, corev1.EventTypeWarning, "Refused", "bad %s: %d", "field", 3)
	select {
	case got := <-rec.Events:
		if want := "Warning Refused bad field: 3"; got != want {
			t.Errorf("recorded %q, want %q", got, want)
		}
	default:
		t.Fatal("no event recorded")
	}
}
