package provisioncap

import (
	"strings"
	"testing"
)

func TestLimit(t *testing.T) {
	for _, tc := range []struct {
		annotations map[string]string
		want        int
		err         string
	}{
		{nil, 0, ""},
		{map[string]string{"other": "3"}, 0, ""},
		{map[string]string{Annotation: "50"}, 50, ""},
		{map[string]string{Annotation: "0"}, 0, `metadata.annotations[machina.dev/max-provisioning]: Invalid value: "0": must be a positive integer`},
		{map[string]string{Annotation: "-2"}, 0, "must be a positive integer"},
		{map[string]string{Annotation: "ten"}, 0, `Invalid value: "ten"`},
	} {
		got, err := Limit(tc.annotations)
		if got != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Limit(%v) = %d, %v; want %d, %q", tc.annotations, got, err, tc.want, tc.err)
		}
	}
}

func TestCreatable(t *testing.T) {
	for _, tc := range []struct{ missing, provisioning, limit, want int }{
		{990, 0, 0, 990}, // no limit
		{990, 0, 10, 10}, // the first pass
		{985, 7, 10, 3},  // three have their Nodes
		{5, 0, 10, 5},    // fewer missing than the limit allows
		{100, 12, 10, 0}, // more provisioning than the limit (it was lowered)
		{0, 3, 10, 0},    // nothing missing
	} {
		if got := Creatable(tc.missing, tc.provisioning, tc.limit); got != tc.want {
			t.Errorf("Creatable(%d, %d, %d) = %d; want %d", tc.missing, tc.provisioning, tc.limit, got, tc.want)
		}
	}
}
