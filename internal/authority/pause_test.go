package authority

import (
	"maps"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// An operator's provider-paused acknowledgement answers one pause: pausing and unpausing
// remove it, finding an unpaused object with one removes it, and an object that stays paused
// keeps it.
func TestSetPausedAndTheOperatorsAcknowledgement(t *testing.T) {
	const p, ack = clusterv1.PausedAnnotation, ProviderPausedAnnotation
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		pause       bool
		changed     bool
		want        map[string]string
	}{
		{"pause removes an earlier acknowledgement", map[string]string{ack: "", "a": "b"}, true, true, map[string]string{p: "", "a": "b"}},
		{"staying paused keeps it", map[string]string{p: "", ack: ""}, true, false, map[string]string{p: "", ack: ""}},
		{"unpause removes it", map[string]string{p: "", ack: ""}, false, true, map[string]string{}},
		{"an unpaused object loses a stray one", map[string]string{ack: "yes"}, false, true, map[string]string{}},
		{"nothing to do", map[string]string{"a": "b"}, false, false, map[string]string{"a": "b"}},
		{"a first pause", nil, true, true, map[string]string{p: ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Annotations: maps.Clone(tc.annotations)}}
			if got := SetPaused(m, tc.pause); got != tc.changed {
				t.Errorf("SetPaused reported change %v, want %v", got, tc.changed)
			}
			if got := m.GetAnnotations(); !maps.Equal(got, tc.want) {
				t.Errorf("annotations %v, want %v", got, tc.want)
			}
		})
	}
}
