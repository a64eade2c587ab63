package clusterapi

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/external"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/machinehealthcheck"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/machineset"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/remote"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/manager"
)

// setupMachineSet adds the MachineSet and MachineHealthCheck controllers.
func setupMachineSet(mgr ctrl.Manager, _ manager.Env, resolver *external.Resolver, remotes *remote.Clients) error {
	if err := (&machineset.Reconciler{
		Client:   mgr.GetClient(),
		Resolver: resolver,
		Recorder: events.For(mgr, "clusterapi-machineset"),
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	return (&machinehealthcheck.Reconciler{
		Client:   mgr.GetClient(),
		Remote:   remotes,
		Recorder: events.For(mgr, "clusterapi-machinehealthcheck"),
	}).SetupWithManager(mgr)
}
