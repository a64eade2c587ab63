package powervs

import (
	mapiv1 "github.com/openshift/api/machine/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	capibmv1 "sigs.k8s.io/cluster-api-provider-ibmcloud/api/powervs/v1beta3"

	"github.com/machina-dev/machina/internal/convert"
)

// A resource reference names a workspace, an image or a network by exactly one of an ID, a
// name or a regular expression. The Machine API says which with its type and reads only that
// field; CAPIBM has no type and reads the first set of id, name, regex. Images and workspaces
// are found by ID or name only, in both APIs.

// refField is one identifier of a resource reference.
type refField struct {
	typ   mapiv1.PowerVSResourceType
	json  string
	value *string
}

func mapiRefFields(in mapiv1.PowerVSResource) []refField {
	return []refField{{mapiv1.PowerVSResourceTypeID, "id", in.ID}, {mapiv1.PowerVSResourceTypeName, "name", in.Name}, {mapiv1.PowerVSResourceTypeRegEx, "regex", in.RegEx}}
}

func capibmRefFields(in capibmv1.IBMPowerVSResourceReference) []refField {
	return []refField{{mapiv1.PowerVSResourceTypeID, "id", in.ID}, {mapiv1.PowerVSResourceTypeName, "name", in.Name}, {mapiv1.PowerVSResourceTypeRegEx, "regex", in.RegEx}}
}

func refTypes(regex bool) []string {
	if regex {
		return []string{string(mapiv1.PowerVSResourceTypeID), string(mapiv1.PowerVSResourceTypeName), string(mapiv1.PowerVSResourceTypeRegEx)}
	}
	return []string{string(mapiv1.PowerVSResourceTypeID), string(mapiv1.PowerVSResourceTypeName)}
}

// refToCAPIBM converts a Machine API resource reference: the field its type names is kept,
// the others, which the Machine API ignores, are dropped (warning). regex says whether the
// resource may be found by regular expression. It returns nil on error.
func refToCAPIBM(in mapiv1.PowerVSResource, regex bool, path *field.Path, r *convert.Report) *capibmv1.IBMPowerVSResourceReference {
	var picked *refField
	for _, f := range mapiRefFields(in) {
		if f.typ == in.Type {
			picked = &f
		}
	}
	switch {
	case in.Type == "":
		r.Error(field.Required(path.Child("type"), "the Machine API reads the identifier the type names: "+joinOr(refTypes(regex))))
		return nil
	case picked == nil, picked.typ == mapiv1.PowerVSResourceTypeRegEx && !regex:
		r.Error(field.NotSupported(path.Child("type"), in.Type, refTypes(regex)))
		return nil
	case picked.value == nil || *picked.value == "":
		r.Error(field.Required(path.Child(picked.json), "type is "+string(in.Type)))
		return nil
	}
	for _, f := range mapiRefFields(in) {
		if f.typ != in.Type && f.value != nil {
			r.Warn(path.Child(f.json), "dropped: the Machine API reads only the %s, as type says", picked.json)
		}
	}
	out := &capibmv1.IBMPowerVSResourceReference{}
	v := ptr.To(*picked.value)
	switch in.Type {
	case mapiv1.PowerVSResourceTypeID:
		out.ID = v
	case mapiv1.PowerVSResourceTypeName:
		out.Name = v
	default:
		out.RegEx = v
	}
	return out
}

// refToMAPI converts a CAPIBM resource reference, which must give exactly one identifier.
// An empty reference is reported as Required with why. ok is false on error.
func refToMAPI(in capibmv1.IBMPowerVSResourceReference, regex bool, why string, path *field.Path, r *convert.Report) (mapiv1.PowerVSResource, bool) {
	var set []refField
	for _, f := range capibmRefFields(in) {
		if f.value != nil {
			set = append(set, f)
		}
	}
	switch {
	case len(set) == 0:
		r.Error(field.Required(path, why))
		return mapiv1.PowerVSResource{}, false
	case len(set) > 1:
		r.Error(field.Invalid(path, in, "give one of id, name and regex: the Machine API reads exactly one"))
		return mapiv1.PowerVSResource{}, false
	}
	f := set[0]
	switch {
	case *f.value == "":
		r.Error(field.Required(path.Child(f.json), "CAPIBM's CRD requires at least one character"))
		return mapiv1.PowerVSResource{}, false
	case f.typ == mapiv1.PowerVSResourceTypeRegEx && !regex:
		r.Error(field.Invalid(path.Child(f.json), *f.value, "CAPIBM does not look this resource up by regular expression, and the Machine API takes only an id or a name"))
		return mapiv1.PowerVSResource{}, false
	}
	out := mapiv1.PowerVSResource{Type: f.typ}
	v := ptr.To(*f.value)
	switch f.typ {
	case mapiv1.PowerVSResourceTypeID:
		out.ID = v
	case mapiv1.PowerVSResourceTypeName:
		out.Name = v
	default:
		out.RegEx = v
	}
	return out, true
}

func joinOr(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	s := ""
	for i, it := range items {
		switch {
		case i == 0:
			s = it
		case i == len(items)-1:
			s += " or " + it
		default:
			s += ", " + it
		}
	}
	return s
}
