// Package clusterapi registers the Cluster API controller group: the Cluster, Machine,
// MachineSet, MachineDeployment, MachineHealthCheck and MachinePool controllers of
// cluster.x-k8s.io/v1beta2. They work with any infrastructure or bootstrap provider that
// follows the Cluster API contract (v1beta2 or v1beta1).
package clusterapi

import (
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/cluster"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/external"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/machine"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/machinedeployment"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/remote"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/manager"
)

// GroupName is the --controllers name of this group.
const GroupName = "clusterapi"

// Group is this controller group, for the list in internal/controllers.
func Group() manager.Group {
	return manager.Group{
		Name:        GroupName,
		Description: "Cluster API (cluster.x-k8s.io): Cluster, Machine, MachineSet, MachineDeployment, MachineHealthCheck, MachinePool, for any contract-following provider",
		Setup:       Setup,
	}
}

// Setup adds the Cluster API controllers to mgr.
func Setup(mgr ctrl.Manager, env manager.Env) error {
	resolver := &external.Resolver{Reader: mgr.GetClient(), Mapper: mgr.GetRESTMapper()}
	// One set of workload-cluster clients and Node caches for every controller of the group.
	remotes := remote.New(mgr.GetClient())
	if err := remotes.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&cluster.Reconciler{
		Client:   mgr.GetClient(),
		Resolver: resolver,
		Recorder: events.For(mgr, "clusterapi-cluster"),
		Resync:   env.Resync,
		Remote:   remotes,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&machine.Reconciler{
		Client:   mgr.GetClient(),
		Resolver: resolver,
		Remote:   remotes,
		Recorder: events.For(mgr, "clusterapi-machine"),
		Resync:   env.Resync,
		NodeName: os.Getenv(machine.NodeNameEnv),
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := setupMachineSet(mgr, env, resolver, remotes); err != nil {
		return err
	}
	if err := (&machinedeployment.Reconciler{
		Client:   mgr.GetClient(),
		Recorder: events.For(mgr, "clusterapi-machinedeployment"),
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	return setupMachinePool(mgr, env, resolver, remotes)
}
