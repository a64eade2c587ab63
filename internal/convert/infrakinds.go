package convert

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// InfraTypes describes a platform's Cluster API infrastructure Go types to NewInfraKinds: M is
// the InfraMachine (e.g. capav1.AWSMachine), T the InfraMachineTemplate, S the machine spec
// both carry (the template in spec.template.spec). It is all a platform writes of the
// plumbing between those objects and the specs its ToInfra and FromInfra work on.
type InfraTypes[M, T, S any] struct {
	// Machine and Template are the kinds of M and T.
	Machine, Template schema.GroupVersionKind
	// MachineSpec and TemplateSpec point at the spec an InfraMachine and an
	// InfraMachineTemplate carry.
	MachineSpec  func(*M) *S
	TemplateSpec func(*T) *S
	// TemplateMetadata returns the labels and annotations a template gives the InfraMachines
	// made from it; nil when the template type has none. The Machine API has no InfraMachines
	// to put them on, so they are dropped with a warning.
	TemplateMetadata func(*T) (labels, annotations map[string]string)
	// ProviderID is where S keeps the providerID: StringProviderID or PointerProviderID.
	ProviderID ProviderIDField[S]
	// Instance is what one providerID names on the platform ("instance", "virtual machine"),
	// for the error on a template that names one.
	Instance string
}

// ProviderIDField is how an InfraMachine spec keeps the providerID. The two shapes the
// providers use differ in what an InfraMachine built without a providerID gets, so each keeps
// its own rule: see StringProviderID and PointerProviderID.
type ProviderIDField[S any] struct {
	get   func(*S) string
	put   func(*S, string)
	clear func(*S)
}

// StringProviderID is a providerID kept in a string field of S, which at returns; "" is none.
// A new InfraMachine always gets the providerID given, even "".
func StringProviderID[S any](at func(*S) *string) ProviderIDField[S] {
	return ProviderIDField[S]{
		get:   func(s *S) string { return *at(s) },
		put:   func(s *S, id string) { *at(s) = id },
		clear: func(s *S) { *at(s) = "" },
	}
}

// PointerProviderID is a providerID kept in a *string field of S, which at returns; nil (or
// "") is none. A new InfraMachine gets only a non-empty providerID.
func PointerProviderID[S any](at func(*S) **string) ProviderIDField[S] {
	return ProviderIDField[S]{
		get: func(s *S) string { return ptr.Deref(*at(s), "") },
		put: func(s *S, id string) {
			if id != "" {
				*at(s) = ptr.To(id)
			}
		},
		clear: func(s *S) { *at(s) = nil },
	}
}

// objectOf is the pointer type of an API object type X, e.g. *capav1.AWSMachine.
type objectOf[X any] interface {
	*X
	client.Object
}

// specOf is the pointer type of a spec type S with its generated DeepCopy.
type specOf[S any] interface {
	*S
	DeepCopy() *S
}

// InfraKinds is the kind plumbing of a Platform — its InfraMachine and InfraMachineTemplate
// kinds, wrapping a spec in either and splitting one back into spec and providerID — written
// once for every platform. A platform keeps the one NewInfraKinds builds from its InfraTypes
// and forwards the Platform methods of the same names to it, adding what only it does (AWS:
// the instanceID derived from the providerID). PM, PT and PS are the pointer types of M, T
// and S; NewInfraKinds infers them.
type InfraKinds[M, T, S any, PM objectOf[M], PT objectOf[T], PS specOf[S]] struct {
	types InfraTypes[M, T, S]
}

// NewInfraKinds returns the kind plumbing of the types t describes.
func NewInfraKinds[M, T, S any, PM objectOf[M], PT objectOf[T], PS specOf[S]](t InfraTypes[M, T, S]) InfraKinds[M, T, S, PM, PT, PS] {
	return InfraKinds[M, T, S, PM, PT, PS]{types: t}
}

// InfraMachineGVK is the Cluster API infrastructure kind of a Machine.
func (k InfraKinds[M, T, S, PM, PT, PS]) InfraMachineGVK() schema.GroupVersionKind {
	return k.types.Machine
}

// InfraMachineTemplateGVK is the Cluster API infrastructure kind of a MachineSet's template.
func (k InfraKinds[M, T, S, PM, PT, PS]) InfraMachineTemplateGVK() schema.GroupVersionKind {
	return k.types.Template
}

// NewInfraMachine wraps a copy of spec (an *S; anything else leaves the spec empty) in an
// InfraMachine carrying providerID.
func (k InfraKinds[M, T, S, PM, PT, PS]) NewInfraMachine(spec InfraSpec, providerID string) client.Object {
	m := PM(new(M))
	m.GetObjectKind().SetGroupVersionKind(k.types.Machine)
	dst := k.types.MachineSpec(m)
	if s, ok := spec.(*S); ok && s != nil {
		*dst = *PS(s).DeepCopy()
	}
	k.types.ProviderID.put(dst, providerID)
	return m
}

// NewInfraMachineTemplate wraps a copy of spec (an *S) in an InfraMachineTemplate.
func (k InfraKinds[M, T, S, PM, PT, PS]) NewInfraMachineTemplate(spec InfraSpec) client.Object {
	t := PT(new(T))
	t.GetObjectKind().SetGroupVersionKind(k.types.Template)
	if s, ok := spec.(*S); ok && s != nil {
		*k.types.TemplateSpec(t) = *PS(s).DeepCopy()
	}
	return t
}

// SplitInfraMachine returns a copy of an InfraMachine's spec without its providerID, and the
// providerID. ok is false when obj is not an *M.
func (k InfraKinds[M, T, S, PM, PT, PS]) SplitInfraMachine(obj client.Object, _ *field.Path, _ *Report) (spec InfraSpec, providerID string, ok bool) {
	m, ok := obj.(PM)
	if !ok || m == nil {
		return nil, "", false
	}
	s := PS(k.types.MachineSpec(m)).DeepCopy()
	providerID = k.types.ProviderID.get(s)
	k.types.ProviderID.clear(s)
	return s, providerID, true
}

// SplitInfraMachineTemplate returns a copy of a template's machine spec, reporting under path
// (the template's "spec") the metadata it drops and a providerID it must not have. ok is false
// when obj is not a *T.
func (k InfraKinds[M, T, S, PM, PT, PS]) SplitInfraMachineTemplate(obj client.Object, path *field.Path, r *Report) (spec InfraSpec, ok bool) {
	t, ok := obj.(PT)
	if !ok || t == nil {
		return nil, false
	}
	if meta := k.types.TemplateMetadata; meta != nil {
		if labels, annotations := meta(t); len(labels) > 0 || len(annotations) > 0 {
			r.Warn(path.Child("template", "metadata"), "labels and annotations for the %ss are dropped: the Machine API has no InfraMachines to put them on", k.types.Machine.Kind)
		}
	}
	s := PS(k.types.TemplateSpec(t)).DeepCopy()
	if id := k.types.ProviderID.get(s); id != "" {
		r.Error(field.Invalid(path.Child("template", "spec", "providerID"), id, "a machine template cannot name one "+k.types.Instance))
	}
	k.types.ProviderID.clear(s)
	return s, true
}
