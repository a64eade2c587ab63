// Package clusterapi registers the Cluster API controller group: the Cluster and Machine
// controllers of cluster.x-k8s.io/v1beta2. They work with any infrastructure or bootstrap
// provider that follows the Cluster API contract (v1beta2 or v1beta1).
package clusterapi

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/cluster"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/external"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/machine"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/remote"
	"github.com/machina-dev/machina/internal/manager"
)

// GroupName is the --controllers name of this group.
const GroupName = "clusterapi"

func init() {
	manager.Register(manager.Group{
		Name:        GroupName,
		Description: "Cluster API (cluster.x-k8s.io): Cluster, Machine, MachineSet, MachineHealthCheck, MachinePool, for any contract-following provider",
		Setup:       Setup,
	})
}

// setupFunc adds one more controller of the group. Controllers add theirs from an init
// function in their own register_<name>.go file, so they never edit a shared list.
type setupFunc func(mgr ctrl.Manager, env manager.Env, resolver *external.Resolver) error

var extraSetups []setupFunc

// addSetup registers a controller of this group.
func addSetup(f setupFunc) { extraSetups = append(extraSetups, f) }

// Setup adds the Cluster API controllers to mgr.
func Setup(mgr ctrl.Manager, env manager.Env) error {
	resolver := &external.Resolver{Reader: mgr.GetClient(), Mapper: mgr.GetRESTMapper()}
	if err := (&cluster.Reconciler{
		Client:   mgr.GetClient(),
		Resolver: resolver,
		Recorder: mgr.GetEventRecorderFor("clusterapi-cluster"),
		Resync:   env.Resync,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&machine.Reconciler{
		Client:   mgr.GetClient(),
		Resolver: resolver,
		Remote:   &remote.Clients{Reader: mgr.GetClient()},
		Recorder: mgr.GetEventRecorderFor("clusterapi-machine"),
		Resync:   env.Resync,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	for _, f := range extraSetups {
		if err := f(mgr, env, resolver); err != nil {
			return err
		}
	}
	return nil
}
