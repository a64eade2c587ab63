package testenv

import (
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/controllers/aws/awsactuator"
	"github.com/machina-dev/machina/internal/controllers/sim/simactuator"
	"github.com/machina-dev/machina/internal/provider"
)

// machineUIDTags are, by platform, the tag the platform's Machine API actuator puts on every
// instance it launches, with the UID of the Machine it launched it for.
var machineUIDTags = map[string]string{
	provider.Sim().Name: simactuator.TagMachineUID,
	provider.AWS().Name: awsactuator.TagMachineUID,
}

// MachineInstances lists the cloud instances (any state) the Machine API actuator of m's
// platform (told by its providerSpec kind) launched for m, so that tests of the
// platform-neutral controllers need not know how a platform marks them. m may be a copy
// read before the Machine was deleted.
func (e *Env) MachineInstances(m *machinev1beta1.Machine) []api.Instance {
	e.T.Helper()
	p, err := provider.Builtin().ForProviderSpecKind(provider.SpecKind(m.Spec.ProviderSpec))
	if err != nil {
		e.T.Fatalf("Machine %s: %v", m.Name, err)
	}
	tag, ok := machineUIDTags[p.Name]
	if !ok {
		e.T.Fatalf("Machine %s: platform %s has no Machine API actuator in machina", m.Name, p.Name)
	}
	return e.InstancesTagged(tag, string(m.UID))
}

// MachineInstance is the one cloud instance launched for m (MachineInstances), failing the
// test when there is none or more than one.
func (e *Env) MachineInstance(m *machinev1beta1.Machine) api.Instance {
	e.T.Helper()
	list := e.MachineInstances(m)
	if len(list) != 1 {
		e.T.Fatalf("Machine %s: %d instances, want 1: %+v", m.Name, len(list), list)
	}
	return list[0]
}
