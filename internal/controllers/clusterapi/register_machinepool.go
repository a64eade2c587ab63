package clusterapi

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/external"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/machinepool"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/remote"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/manager"
)

// setupMachinePool adds the MachinePool controller: replicas, providerIDList, Nodes and, for providers that opt
// in, one Machine per instance (MachinePool Machines).
func setupMachinePool(mgr ctrl.Manager, env manager.Env, resolver *external.Resolver, remotes *remote.Clients) error {
	return (&machinepool.Reconciler{
		Client:   mgr.GetClient(),
		Resolver: resolver,
		Remote:   remotes,
		Recorder: events.For(mgr, "clusterapi-machinepool"),
		Resync:   env.Resync,
	}).SetupWithManager(mgr)
}
