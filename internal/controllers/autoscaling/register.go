// Package autoscaling registers the scale-from-zero controller group: the controllers that
// tell the cluster autoscaler, from the simulated cloud's catalogue of instance types, what a
// Node of an empty node group would offer. One per API:
//
//   - Machine API: simmachineset annotates simulated-provider MachineSets with
//     machine.openshift.io/vCPU, memoryMb, GPU and the kubernetes.io/arch capacity label.
//   - Cluster API: simmachinetemplate fills SimMachineTemplate status.capacity and
//     status.nodeInfo.
//
// See docs/autoscaling.md.
package autoscaling

import (
	"errors"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	cloudclient "github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/controllers/sim/simmachineset"
	"github.com/machina-dev/machina/internal/controllers/sim/simmachinetemplate"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/manager"
)

// GroupName is the --controllers name of this group.
const GroupName = "autoscaling"

// Group is this controller group, for the list in internal/controllers.
func Group() manager.Group {
	return manager.Group{
		Name:        GroupName,
		Description: "scale from zero: instance capacity on simulated-provider MachineSets (machine.openshift.io) and SimMachineTemplates",
		Setup:       Setup,
	}
}

// Setup adds the scale-from-zero controllers to mgr.
func Setup(mgr ctrl.Manager, env manager.Env) error {
	if env.CloudURL == "" {
		return errors.New("the scale-from-zero controllers read the simulated cloud's catalogue: set --cloud-url")
	}
	cloud, err := cloudclient.New(env.CloudURL, cloudclient.Options{
		// A controller retries by requeueing; a short in-call retry keeps workers free.
		MaxRetries: 2, MaxBackoff: time.Second, UserAgent: "machina-autoscaling",
	})
	if err != nil {
		return err
	}
	if err := (&simmachineset.Reconciler{
		Client: mgr.GetClient(), Cloud: cloud,
		Recorder: events.For(mgr, "machineapi-simmachineset"), Resync: env.Resync,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	return (&simmachinetemplate.Reconciler{
		Client: mgr.GetClient(), Cloud: cloud,
		Recorder: events.For(mgr, "sim-simmachinetemplate"), Resync: env.Resync,
	}).SetupWithManager(mgr)
}
