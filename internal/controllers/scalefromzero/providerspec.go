package scalefromzero

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Paths of the template's providerSpec, for messages.
const (
	SpecPath         = "spec.template.spec.providerSpec.value"
	InstanceTypePath = SpecPath + ".instanceType"
)

// SpecType says which providerSpecs a platform claims.
type SpecType struct {
	// Kind is the providerSpec kind.
	Kind string
	// Groups are the API groups its apiVersion may name (any version).
	Groups []string
	// ClaimUnkinded claims a providerSpec that names no kind at all.
	ClaimUnkinded bool
}

// DecodeProviderSpec decodes the providerSpec of ms's template into out when it is of type
// st. claimed is false for a MachineSet without a providerSpec or with another provider's (a
// kind, or an apiVersion of another group); err is set when it claims to be of st but does
// not decode into out.
func DecodeProviderSpec(ms *machinev1beta1.MachineSet, st SpecType, out any) (claimed bool, err error) {
	v := ms.Spec.Template.Spec.ProviderSpec.Value
	if v == nil {
		return false, nil
	}
	raw := v.Raw
	if len(raw) == 0 {
		if v.Object == nil {
			return false, nil
		}
		if raw, err = json.Marshal(v.Object); err != nil {
			return true, fmt.Errorf("%s: %v", SpecPath, err)
		}
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(raw, &tm); err != nil {
		// Not even an object: the MachineSet controller reports it; nothing to annotate.
		return false, nil
	}
	if tm.Kind != st.Kind && (tm.Kind != "" || !st.ClaimUnkinded) {
		return false, nil
	}
	if tm.APIVersion != "" {
		if gv, err := schema.ParseGroupVersion(tm.APIVersion); err != nil || !slices.Contains(st.Groups, gv.Group) {
			return false, nil
		}
	}
	if err := json.NewDecoder(bytes.NewReader(raw)).Decode(out); err != nil {
		return true, fmt.Errorf("%s: not a %s: %v", SpecPath, st.Kind, err)
	}
	return true, nil
}
