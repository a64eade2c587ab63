package sim

import (
	ctrl "sigs.k8s.io/controller-runtime"

	cloudclient "github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/controllers/sim/simmachinepool"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/manager"
)

// setupSimMachinePool adds the SimMachinePool controller: a MachinePool's scaling group, with one SimMachine per
// instance (MachinePool Machines).
func setupSimMachinePool(mgr ctrl.Manager, env manager.Env, cloud *cloudclient.Client) error {
	return (&simmachinepool.Reconciler{
		Client: mgr.GetClient(), Cloud: cloud,
		Recorder: events.For(mgr, "sim-simmachinepool"), Resync: env.Resync,
	}).SetupWithManager(mgr)
}
