package clusterapi

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/external"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/machinepool"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/remote"
	"github.com/machina-dev/machina/internal/manager"
)

// The MachinePool controller: replicas, providerIDList, Nodes and, for providers that opt
// in, one Machine per instance (MachinePool Machines).
func init() {
	addSetup(func(mgr ctrl.Manager, env manager.Env, resolver *external.Resolver) error {
		return (&machinepool.Reconciler{
			Client:   mgr.GetClient(),
			Resolver: resolver,
			Remote:   &remote.Clients{Reader: mgr.GetClient()},
			Recorder: mgr.GetEventRecorderFor("clusterapi-machinepool"),
			Resync:   env.Resync,
		}).SetupWithManager(mgr)
	})
}
