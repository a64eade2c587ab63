package migration

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/ocpconfig"
)

// GroupName is the --controllers name of this group.
const GroupName = "migration"

// Group is this controller group, for the list in internal/controllers.
func Group() manager.Group {
	return manager.Group{
		Name:        GroupName,
		Description: "hands authority over Machines, MachineSets and MachineHealthChecks between the Machine API and Cluster API",
		Setup:       Setup,
	}
}

// The start check reads the Machine API CRDs (authority.CheckMachineAPICRDs).
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get

// Setup adds the migration controllers to mgr, or refuses to when the installed Machine API
// CRDs lack the authority fields the controllers write (authority.CheckMachineAPICRDs). On
// an OpenShift cluster they run only while its FeatureGate enables MachineAPIMigration, and
// the group reports on the machine-api ClusterOperator (internal/ocpconfig).
func Setup(mgr ctrl.Manager, env manager.Env) error {
	reader := mgr.GetAPIReader()
	mgr, err := ocpconfig.Setup(mgr, env, ocpconfig.Migration, func(ctx context.Context) error {
		return authority.CheckMachineAPICRDs(ctx, reader)
	})
	if err != nil {
		return err
	}
	mapiNS, capiNS := env.Namespaces()
	ns := authority.Namespaces{MachineAPI: mapiNS, ClusterAPI: capiNS}
	if err := NewMachineReconciler(mgr.GetClient(), ns, env.ProviderRegistry(), events.For(mgr, "migration-machine")).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := NewMachineSetReconciler(mgr.GetClient(), ns, env.ProviderRegistry(), events.For(mgr, "migration-machineset")).SetupWithManager(mgr); err != nil {
		return err
	}
	return NewMachineHealthCheckReconciler(mgr.GetClient(), ns, events.For(mgr, "migration-machinehealthcheck")).SetupWithManager(mgr)
}
