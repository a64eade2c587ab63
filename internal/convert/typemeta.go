package convert

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// SpecType is the type a platform's Machine API providerSpec values are written with.
type SpecType struct {
	// APIVersion is the one converting back writes.
	APIVersion string
	// Legacy, when set, is an older apiVersion the platform's values still carry.
	Legacy string
	// Kind decides the platform.
	Kind string
}

// CheckTypeMeta reads a providerSpec value's apiVersion and kind. The Machine API actuators
// decode the value into their one type whatever apiVersion it names, so an unexpected or
// missing apiVersion is a warning; the kind decides the platform and must be right (unset is
// read as the platform's, with a warning).
func CheckTypeMeta(apiVersion, kind string, t SpecType, path *field.Path, r *Report) {
	switch apiVersion {
	case t.APIVersion:
	case "":
		r.Warn(path.Child("apiVersion"), "unset; read as %s", t.APIVersion)
	default:
		if t.Legacy != "" && apiVersion == t.Legacy {
			r.Warn(path.Child("apiVersion"), "legacy apiVersion; converting back writes %s", t.APIVersion)
			break
		}
		r.Warn(path.Child("apiVersion"), "%q is not %s; the Machine API ignores the apiVersion and reads the value as %s, and so does the conversion; converting back writes %s",
			apiVersion, t.APIVersion, t.Kind, t.APIVersion)
	}
	switch kind {
	case t.Kind:
	case "":
		r.Warn(path.Child("kind"), "unset; read as %s", t.Kind)
	default:
		r.Error(field.NotSupported(path.Child("kind"), kind, []string{t.Kind}))
	}
}
