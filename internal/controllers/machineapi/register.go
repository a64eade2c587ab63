// Package machineapi registers the platform-neutral Machine API controller group: MachineSet,
// MachineHealthCheck and NodeLink. The Machine controller runs once per platform, around that
// platform's actuator, in the platform's own group ("sim", "aws"); this group talks to no cloud.
package machineapi

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/machina-dev/machina/internal/controllers/machineapi/machinehealthcheck"
	"github.com/machina-dev/machina/internal/controllers/machineapi/machineset"
	"github.com/machina-dev/machina/internal/controllers/machineapi/nodelink"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/manager"
)

// GroupName is the --controllers name of this group.
const GroupName = "machineapi"

// Group is this controller group, for the list in internal/controllers.
func Group() manager.Group {
	return manager.Group{
		Name:        GroupName,
		Description: "Machine API (machine.openshift.io): MachineSet, MachineHealthCheck, NodeLink; each platform's group runs its Machine controller",
		Setup:       Setup,
	}
}

// Setup adds the Machine API controllers to mgr.
func Setup(mgr ctrl.Manager, env manager.Env) error {
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
