// Package machineapi registers the Machine API controller group: the Machine controller with
// the simulated cloud's actuator, and NodeLink. (MachineSet and MachineHealthCheck join it.)
package machineapi

import (
	"context"
	"errors"
	"os"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	cloudclient "github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/controllers/machineapi/machine"
	"github.com/machina-dev/machina/internal/controllers/machineapi/machinehealthcheck"
	"github.com/machina-dev/machina/internal/controllers/machineapi/machineset"
	"github.com/machina-dev/machina/internal/controllers/machineapi/nodelink"
	"github.com/machina-dev/machina/internal/controllers/sim/simactuator"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/provider"
)

// GroupName is the --controllers name of this group.
const GroupName = "machineapi"

// Group is this controller group, for the list in internal/controllers.
func Group() manager.Group {
	return manager.Group{
		Name:        GroupName,
		Description: "Machine API (machine.openshift.io): Machine with the simulated actuator, MachineSet, MachineHealthCheck, NodeLink",
		Setup:       Setup,
		// The Machine controller above, with the simulated actuator.
		MachineAPIKinds: provider.Sim().ProviderSpecKinds,
	}
}

// Setup adds the Machine API controllers to mgr.
func Setup(mgr ctrl.Manager, env manager.Env) error {
	if env.CloudURL == "" {
		return errors.New("the Machine API controllers need the simulated cloud: set --cloud-url")
	}
	cloud, err := cloudclient.New(env.CloudURL, cloudclient.Options{
		// A controller retries by requeueing; a short in-call retry keeps workers free.
		MaxRetries: 2, MaxBackoff: time.Second, UserAgent: "machina-machineapi",
	})
	if err != nil {
		return err
	}
	if err := (&machine.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Actuator:  &simactuator.Actuator{Cloud: cloud, Client: mgr.GetClient()},
		// Machines of other platforms belong to their own actuators.
		ProviderSpecKinds: provider.Sim().ProviderSpecKinds,
		Recorder:          events.For(mgr, "machineapi-machine"),
		Resync:            env.Resync,
		NodeName:          os.Getenv(machine.NodeNameEnv),
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&machineset.Reconciler{Client: mgr.GetClient(),
		FinalizedKinds: env.MachineAPIKinds,
		Recorder:       events.For(mgr, "machineapi-machineset")}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&machinehealthcheck.Reconciler{Client: mgr.GetClient(),
		Recorder: events.For(mgr, "machineapi-machinehealthcheck")}).SetupWithManager(mgr); err != nil {
		return err
	}
	return (&nodelink.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(context.Background(), mgr)
}
