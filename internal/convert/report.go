package convert

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Warning is a lossy-but-safe choice the converter made: the target object behaves the same
// for every practical purpose, but converting it back will not restore the input byte for byte.
type Warning struct {
	// Field is the path of the value in the input object, e.g. "spec.providerSpec.value.region".
	Field string
	// Detail says what was done and why.
	Detail string
}

func (w Warning) String() string {
	if w.Field == "" {
		return w.Detail
	}
	return w.Field + ": " + w.Detail
}

// Warnings is the list of warnings of one conversion.
type Warnings []Warning

// Strings renders the warnings one per element.
func (ws Warnings) Strings() []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.String()
	}
	return out
}

// Report collects the problems of one conversion. Platforms append to it; every problem is
// collected, conversion never stops at the first one.
type Report struct {
	Errors   field.ErrorList
	Warnings Warnings
}

// Warn records a warning for the value at path.
func (r *Report) Warn(path *field.Path, format string, args ...any) {
	f := ""
	if path != nil {
		f = path.String()
	}
	r.Warnings = append(r.Warnings, Warning{Field: f, Detail: fmt.Sprintf(format, args...)})
}

// Error records errors.
func (r *Report) Error(errs ...*field.Error) { r.Errors = append(r.Errors, errs...) }

// Unsupported records that a set value has no equivalent in the target API.
func (r *Report) Unsupported(path *field.Path, value any, target string) {
	r.Errors = append(r.Errors, field.Invalid(path, value, "has no equivalent in "+target+"; unset it to convert"))
}

// HasErrors reports whether any error was recorded.
func (r *Report) HasErrors() bool { return len(r.Errors) > 0 }

// sorted returns the report's lists in a stable order (by path, then message) so output and
// tests are deterministic regardless of map iteration order.
func (r *Report) sorted() (Warnings, field.ErrorList) {
	sort.SliceStable(r.Warnings, func(i, j int) bool {
		if r.Warnings[i].Field != r.Warnings[j].Field {
			return r.Warnings[i].Field < r.Warnings[j].Field
		}
		return r.Warnings[i].Detail < r.Warnings[j].Detail
	})
	sort.SliceStable(r.Errors, func(i, j int) bool {
		if r.Errors[i].Field != r.Errors[j].Field {
			return r.Errors[i].Field < r.Errors[j].Field
		}
		return r.Errors[i].Error() < r.Errors[j].Error()
	})
	return r.Warnings, r.Errors
}
