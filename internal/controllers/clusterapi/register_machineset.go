package clusterapi

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/external"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/machinehealthcheck"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/machineset"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/remote"
	"github.com/machina-dev/machina/internal/manager"
)

// The MachineSet and MachineHealthCheck controllers.
func init() {
	addSetup(func(mgr ctrl.Manager, _ manager.Env, resolver *external.Resolver) error {
		if err := (&machineset.Reconciler{
			Client:   mgr.GetClient(),
			Resolver: resolver,
			Recorder: mgr.GetEventRecorderFor("clusterapi-machineset"),
		}).SetupWithManager(mgr); err != nil {
			return err
		}
		return (&machinehealthcheck.Reconciler{
			Client:   mgr.GetClient(),
			Remote:   &remote.Clients{Reader: mgr.GetClient()},
			Recorder: mgr.GetEventRecorderFor("clusterapi-machinehealthcheck"),
		}).SetupWithManager(mgr)
	})
}
