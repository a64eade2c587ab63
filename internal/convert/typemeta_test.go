package convert

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestCheckTypeMeta(t *testing.T) {
	st := SpecType{APIVersion: "machine.openshift.io/v1beta1", Legacy: "old.openshift.io/v1beta1", Kind: "ExampleProviderSpec"}
	for _, tc := range []struct {
		apiVersion, kind string
		warnings, errors int
		mention          string
	}{
		{"machine.openshift.io/v1beta1", "ExampleProviderSpec", 0, 0, ""},
		{"old.openshift.io/v1beta1", "ExampleProviderSpec", 1, 0, "legacy"},
		{"", "", 2, 0, "unset"},
		{"other.example.com/v1", "ExampleProviderSpec", 1, 0, "ignores the apiVersion"},
		{"machine.openshift.io/v1beta1", "OtherProviderSpec", 0, 1, "ExampleProviderSpec"},
	} {
		var r Report
		CheckTypeMeta(tc.apiVersion, tc.kind, st, field.NewPath("value"), &r)
		all := r.Errors.ToAggregate()
		text := ""
		for _, w := range r.Warnings {
			text += w.Detail + ";"
		}
		if all != nil {
			text += all.Error()
		}
		if len(r.Warnings) != tc.warnings || len(r.Errors) != tc.errors || !strings.Contains(text, tc.mention) {
			t.Errorf("%q/%q: %d warnings, %d errors (%s); want %d, %d mentioning %q",
				tc.apiVersion, tc.kind, len(r.Warnings), len(r.Errors), text, tc.warnings, tc.errors, tc.mention)
		}
	}
}
