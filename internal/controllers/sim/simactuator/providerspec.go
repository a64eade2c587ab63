package simactuator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	cloudclient "github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/controllers/machineapi/machine"
)

type runtimeRawExtension = runtime.RawExtension

const specPath = "spec.providerSpec.value"

// ProviderSpec decodes and checks a Machine's SimMachineProviderSpec. Problems are
// InvalidConfiguration errors naming the field.
func ProviderSpec(m *machinev1beta1.Machine) (*infrav1.SimMachineProviderSpec, error) {
	v := m.Spec.ProviderSpec.Value
	if v == nil || (len(v.Raw) == 0 && v.Object == nil) {
		return nil, machine.InvalidConfiguration("%s: Required value: a SimMachineProviderSpec is needed", specPath)
	}
	raw := v.Raw
	if raw == nil {
		var err error
		if raw, err = json.Marshal(v.Object); err != nil {
			return nil, machine.InvalidConfiguration("%s: %v", specPath, err)
		}
	}
	ps := &infrav1.SimMachineProviderSpec{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(ps); err != nil {
		return nil, machine.InvalidConfiguration("%s: not a SimMachineProviderSpec: %v", specPath, err)
	}
	if ps.Kind != "" && ps.Kind != "SimMachineProviderSpec" {
		return nil, machine.InvalidConfiguration("%s.kind: Unsupported value: %q: supported values: \"SimMachineProviderSpec\"", specPath, ps.Kind)
	}
	var missing []string
	for _, f := range []struct{ name, val string }{{"region", ps.Region}, {"zone", ps.Zone}, {"instanceType", ps.InstanceType}, {"image", ps.Image}} {
		if f.val == "" {
			missing = append(missing, specPath+"."+f.name+": Required value")
		}
	}
	if len(missing) > 0 {
		return nil, machine.InvalidConfiguration("%s", strings.Join(missing, ", "))
	}
	return ps, nil
}

// ProviderStatus decodes a Machine's SimMachineProviderStatus (nil when unset).
func ProviderStatus(m *machinev1beta1.Machine) (*infrav1.SimMachineProviderStatus, error) {
	if m.Status.ProviderStatus == nil || len(m.Status.ProviderStatus.Raw) == 0 {
		return nil, nil
	}
	st := &infrav1.SimMachineProviderStatus{}
	return st, json.Unmarshal(m.Status.ProviderStatus.Raw, st)
}

// requestFields maps the cloud's request fields to providerSpec fields.
var requestFields = map[string]string{
	"region": "region", "zone": "zone", "instanceType": "instanceType", "image": "image",
	"userData": "userDataSecret", "tags": "tags",
}

// cloudError classifies a cloud failure: the cloud refusing the request is the Machine's
// fault (terminal, naming the providerSpec field); capacity, throttling and outages are
// retried later, never a failure of the Machine.
func cloudError(what string, err error) error {
	switch {
	case cloudclient.IsInvalid(err):
		field := specPath
		if f, ok := requestFields[cloudclient.InvalidField(err)]; ok {
			field += "." + f
		}
		msg := err.Error()
		if ae, ok := cloudclient.AsError(err); ok {
			msg = ae.Message
		}
		return machine.InvalidConfiguration("%s: Invalid value: %s", field, msg)
	case cloudclient.IsCapacity(err):
		return machine.RequeueAfter(CapacityRetry, "InsufficientCapacity", fmt.Errorf("%s: %w", what, err))
	default:
		return machine.RequeueAfter(UnavailableRetry, "CloudUnavailable", fmt.Errorf("%s: %w", what, err))
	}
}
