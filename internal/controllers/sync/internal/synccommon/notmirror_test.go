package synccommon

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
)

// Only an active Cluster API copy without the sync finalizer is someone else's: a paused one
// is given up to the sync, one with the sync finalizer is the sync's own (a mirror, or an
// authoritative copy of a pair), and none at all is no conflict.
func TestNotMirror(t *testing.T) {
	paused := map[string]string{clusterv1.PausedAnnotation: ""}
	machine := func(annotations map[string]string, finalizers ...string) *clusterv1.Machine {
		return &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", Annotations: annotations, Finalizers: finalizers}}
	}
	for _, tc := range []struct {
		name string
		capi client.Object
		want bool
	}{
		{"none", nil, false},
		{"nil pointer", (*clusterv1.Machine)(nil), false},
		{"active, no sync finalizer", machine(nil, clusterv1.MachineFinalizer), true},
		{"active MachineSet, no finalizer", &clusterv1.MachineSet{}, true},
		{"paused by its user", machine(paused), false},
		{"the sync's paused mirror", machine(paused, authority.SyncFinalizer), false},
		{"the sync's authoritative copy", machine(nil, authority.SyncFinalizer, clusterv1.MachineFinalizer), false},
	} {
		if got := NotMirror(tc.capi); got != tc.want {
			t.Errorf("%s: NotMirror = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The message names the resource, says what to do, and says when it is on its way out.
func TestNotMirrorMessage(t *testing.T) {
	capi := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "openshift-cluster-api", Name: "x"}}
	msg := notMirrorError("Machine", capi).Error()
	for _, want := range []string{"Cluster API Machine openshift-cluster-api/x", "rename the Machine API Machine x", "delete one of the two"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "being deleted") {
		t.Errorf("message %q says a live Machine is being deleted", msg)
	}
	now := metav1.Now()
	capi.DeletionTimestamp = &now
	if msg := notMirrorError("Machine", capi).Error(); !strings.Contains(msg, "being deleted") {
		t.Errorf("message %q does not say the Machine is being deleted", msg)
	}
}
