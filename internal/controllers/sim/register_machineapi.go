package sim

import (
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	cloudclient "github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/controllers/machineapi/machine"
	"github.com/machina-dev/machina/internal/controllers/sim/simactuator"
	"github.com/machina-dev/machina/internal/controllers/sim/simmachineset"
	"github.com/machina-dev/machina/internal/controllers/sim/simmachinetemplate"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/provider"
)

// setupMachineAPI adds the Machine API Machine controller with the simulated actuator.
func setupMachineAPI(mgr ctrl.Manager, env manager.Env, cloud *cloudclient.Client) error {
	return (&machine.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Actuator:  &simactuator.Actuator{Cloud: cloud, Client: mgr.GetClient()},
		// Machines of other platforms belong to their own actuators.
		ProviderSpecKinds:       provider.Sim().ProviderSpecKinds,
		Recorder:                events.For(mgr, "machineapi-machine"),
		Resync:                  env.Resync,
		NodeName:                os.Getenv(machine.NodeNameEnv),
		MaxConcurrentReconciles: env.MachineConcurrency,
	}).SetupWithManager(mgr)
}

// setupScaleFromZero adds the controllers that tell the cluster autoscaler, from the cloud's
// catalogue of instance types, what a Node of an empty node group would offer: one for
// Machine API MachineSets, one for SimMachineTemplates.
func setupScaleFromZero(mgr ctrl.Manager, env manager.Env, cloud *cloudclient.Client) error {
	if err := (&simmachineset.Reconciler{
		Client: mgr.GetClient(), Cloud: cloud,
		Recorder: events.For(mgr, "machineapi-simmachineset"), Resync: env.Resync,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	return (&simmachinetemplate.Reconciler{
		Client: mgr.GetClient(), Cloud: cloud,
		Recorder: events.For(mgr, "sim-simmachinetemplate"), Resync: env.Resync,
	}).SetupWithManager(mgr)
}
