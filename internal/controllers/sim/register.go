// Package sim registers the simulated infrastructure provider's controller group: SimCluster
// and SimMachine, following the Cluster API infrastructure contract against machina's
// simulated cloud. (SimMachineTemplate capacity is reported by the autoscaling group.)
package sim

import (
	"errors"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	cloudclient "github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/controllers/sim/simcluster"
	"github.com/machina-dev/machina/internal/controllers/sim/simmachine"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/manager"
)

// GroupName is the --controllers name of this group.
const GroupName = "sim"

// Group is this controller group, for the list in internal/controllers.
func Group() manager.Group {
	return manager.Group{
		Name:        GroupName,
		Description: "simulated infrastructure provider (infrastructure.machina.dev): SimCluster, SimMachine, SimMachinePool",
		Setup:       Setup,
	}
}

// Setup adds the simulated provider's controllers to mgr.
func Setup(mgr ctrl.Manager, env manager.Env) error {
	if env.CloudURL == "" {
		return errors.New("the simulated provider's controllers need the simulated cloud: set --cloud-url")
	}
	cloud, err := cloudclient.New(env.CloudURL, cloudclient.Options{
		// A controller retries by requeueing; a short in-call retry keeps workers free.
		MaxRetries: 2, MaxBackoff: time.Second, UserAgent: "machina-sim-provider",
	})
	if err != nil {
		return err
	}
	if err := (&simcluster.Reconciler{
		Client: mgr.GetClient(), Cloud: cloud,
		Recorder: events.For(mgr, "sim-simcluster"), Resync: env.Resync,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&simmachine.Reconciler{
		Client: mgr.GetClient(), Cloud: cloud,
		Recorder: events.For(mgr, "sim-simmachine"), Resync: env.Resync,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	return setupSimMachinePool(mgr, env, cloud)
}
