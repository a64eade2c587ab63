package ocpconfig

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/machina-dev/machina/internal/manager"
)

// DefaultPeriod is how often the gate is read and the ClusterOperator condition written
// (manager.Env.Resync instead, when set: tests shorten it).
const DefaultPeriod = 30 * time.Second

// Part says which group is set up, and so which condition it reports.
type Part struct{ group string }

// The two groups this package serves.
var (
	Sync      = Part{group: "sync"}
	Migration = Part{group: "migration"}
)

// Setup puts a group of the sync or the migration under the cluster's FeatureGate and adds
// its ClusterOperator condition (see the package comment). check is what the group verifies
// before its controllers first start (authority.CheckMachineAPICRDs): at once when the gate
// lets the group run at start, so that its error fails the group's setup as before, or when
// the gate opens later. The group adds its controllers to the returned manager.
func Setup(mgr ctrl.Manager, env manager.Env, p Part, check func(context.Context) error) (ctrl.Manager, error) {
	period := env.Resync
	if period <= 0 {
		period = DefaultPeriod
	}
	g, err := NewGate(context.Background(), p.group, mgr.GetAPIReader(), period, check)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(g); err != nil {
		return nil, err
	}
	mapiNS, _ := env.Namespaces()
	r := &Reporter{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Gate: g, Period: period}
	switch p {
	case Sync:
		r.Condition, r.Health = SyncCondition, SyncHealth(mgr.GetCache(), mapiNS)
	case Migration:
		r.Condition, r.Health = MigrationCondition, MigrationHealth(mgr.GetCache(), mapiNS, StuckAfter, time.Now)
	}
	if err := mgr.Add(r); err != nil {
		return nil, err
	}
	return g.Manager(mgr), nil
}
