// Package sync registers the sync controller group: live two-way mirroring of Machines (and,
// as they land, MachineSets and MachineHealthChecks) between the Machine API and Cluster API,
// and the health check of mirrors that carries a Cluster API check over to Machines the
// Machine API owns.
package sync

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/machinehealthcheck"
	"github.com/machina-dev/machina/internal/controllers/sync/machinesetsync"
	"github.com/machina-dev/machina/internal/controllers/sync/machinesync"
	"github.com/machina-dev/machina/internal/controllers/sync/mhcsync"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/ocpconfig"
)

// GroupName is the --controllers name of this group.
const GroupName = "sync"

// Group is this controller group, for the list in internal/controllers.
func Group() manager.Group {
	return manager.Group{
		Name:        GroupName,
		Description: "Machine API <-> Cluster API mirroring of Machines, MachineSets and MachineHealthChecks",
		Setup:       Setup,
	}
}

// The start check reads the Machine API CRDs (authority.CheckMachineAPICRDs).
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get

// Setup adds the sync controllers to mgr, or refuses to when the installed Machine API CRDs
// lack the authority fields the controllers write (authority.CheckMachineAPICRDs). On an
// OpenShift cluster they run only while its FeatureGate enables MachineAPIMigration, and
// the group reports on the machine-api ClusterOperator (internal/ocpconfig).
func Setup(mgr ctrl.Manager, env manager.Env) error {
	reader := mgr.GetAPIReader()
	mgr, err := ocpconfig.Setup(mgr, env, ocpconfig.Sync, func(ctx context.Context) error {
		return authority.CheckMachineAPICRDs(ctx, reader)
	})
	if err != nil {
		return err
	}
	mapiNS, capiNS := env.Namespaces()
	ns := authority.Namespaces{MachineAPI: mapiNS, ClusterAPI: capiNS, AdditionalSyncMachineLabels: env.AdditionalSyncMachineLabels}
	providers := env.ProviderRegistry()
	if err := (&machinesync.Reconciler{
		Client: mgr.GetClient(), APIReader: reader, Namespaces: ns, Recorder: events.For(mgr, "sync-machine"),
		Providers: providers,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&machinesetsync.Reconciler{
		Client: mgr.GetClient(), APIReader: reader, Namespaces: ns, Recorder: events.For(mgr, "sync-machineset"),
		Providers: providers, AutoscalerFieldManager: env.AutoscalerManager(),
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&mhcsync.Reconciler{
		Client: mgr.GetClient(), Namespaces: ns, Recorder: events.For(mgr, "sync-machinehealthcheck"),
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	// Cluster API-owned checks over Machines the Machine API owns: the Cluster API check
	// controllers leave their paused mirrors out (clusterapi/machinehealthcheck, mirrors.go).
	return (&machinehealthcheck.Reconciler{
		Client: mgr.GetClient(), Recorder: events.For(mgr, "sync-mirror-machinehealthcheck"), Mirrors: true,
	}).SetupWithManager(mgr)
}
