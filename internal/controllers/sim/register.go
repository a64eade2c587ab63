// Package sim registers the simulated platform's controller group: everything that talks to
// machina's simulated cloud, in both APIs.
//
//   - Cluster API infrastructure provider (infrastructure.machina.dev): SimCluster, SimMachine
//     and SimMachinePool, following the infrastructure contract.
//   - Machine API: the Machine controller with the simulated actuator (simactuator), for
//     Machines whose providerSpec is a SimMachineProviderSpec.
//   - Scale from zero: the instance capacity the cluster autoscaler reads for an empty node
//     group, from the cloud's catalogue — annotations on simulated-provider MachineSets
//     (simmachineset) and SimMachineTemplate status.capacity (simmachinetemplate); see
//     docs/autoscaling.md.
//
// The platform-neutral Machine API controllers (MachineSet, MachineHealthCheck, NodeLink) are
// the "machineapi" group's, as the AWS platform's are the "aws" group's.
package sim

import (
	"errors"
	"time"

	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	cloudclient "github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/controllers/sim/simcluster"
	"github.com/machina-dev/machina/internal/controllers/sim/simmachine"
	"github.com/machina-dev/machina/internal/controllers/sim/simorphans"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/provider"
)

// GroupName is the --controllers name of this group.
const GroupName = "sim"

// Options are this group's own settings.
type Options struct {
	// CloudURL is the simulated cloud's endpoint (--cloud-url); the group cannot run without it.
	CloudURL string
}

// AddFlags registers the group's flags, which set o.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.CloudURL, "cloud-url", o.CloudURL, `endpoint of the simulated cloud, for the simulated platform's controllers (group "sim")`)
}

// Group is this controller group, for the list in internal/controllers; its Setup reads o.
func Group(o *Options) manager.Group {
	return manager.Group{
		Name:        GroupName,
		Description: "simulated platform (--cloud-url): SimCluster, SimMachine, SimMachinePool (infrastructure.machina.dev), Machine API Machines with a SimMachineProviderSpec, scale-from-zero capacity",
		Setup:       func(mgr ctrl.Manager, env manager.Env) error { return Setup(mgr, env, *o) },
		AddFlags:    o.AddFlags,
		// The Machine API Machine controller with the simulated actuator.
		MachineAPIKinds: provider.Sim().ProviderSpecKinds,
	}
}

// Setup adds the simulated platform's controllers to mgr.
func Setup(mgr ctrl.Manager, env manager.Env, o Options) error {
	if o.CloudURL == "" {
		return errors.New("the simulated platform's controllers need the simulated cloud: set --cloud-url")
	}
	cloud, err := cloudclient.New(o.CloudURL, cloudclient.Options{
		// A controller retries by requeueing; a short in-call retry keeps workers free.
		MaxRetries: 2, MaxBackoff: time.Second, UserAgent: "machina-sim-provider",
	})
	if err != nil {
		return err
	}
	for _, setup := range []func(ctrl.Manager, manager.Env, *cloudclient.Client) error{
		setupInfrastructure, setupSimMachinePool, setupMachineAPI, setupScaleFromZero,
	} {
		if err := setup(mgr, env, cloud); err != nil {
			return err
		}
	}
	return nil
}

// setupInfrastructure adds the SimCluster and SimMachine controllers.
func setupInfrastructure(mgr ctrl.Manager, env manager.Env, cloud *cloudclient.Client) error {
	if err := (&simcluster.Reconciler{
		Client: mgr.GetClient(), Cloud: cloud,
		Recorder: events.For(mgr, "sim-simcluster"), Resync: env.Resync,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.Add(&simorphans.Sweeper{Cache: mgr.GetCache(), Reader: mgr.GetAPIReader(), Cloud: cloud}); err != nil {
		return err
	}
	return (&simmachine.Reconciler{
		Client: mgr.GetClient(), Cloud: cloud,
		Recorder: events.For(mgr, "sim-simmachine"), Resync: env.Resync,
	}).SetupWithManager(mgr)
}
