// Package controllers is the one list of the controller groups built into machina. The
// manager package runs whichever of them --controllers selects but imports none of them;
// the command line (internal/cli) and the integration tests (internal/testenv) take the list
// from here. A new group is one more line in Groups.
package controllers

import (
	"github.com/machina-dev/machina/internal/authorityhook"
	"github.com/machina-dev/machina/internal/controllers/autoscaling"
	"github.com/machina-dev/machina/internal/controllers/aws"
	"github.com/machina-dev/machina/internal/controllers/clusterapi"
	"github.com/machina-dev/machina/internal/controllers/machineapi"
	"github.com/machina-dev/machina/internal/controllers/migration"
	"github.com/machina-dev/machina/internal/controllers/sim"
	"github.com/machina-dev/machina/internal/controllers/sync"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/opsmetrics"
)

// Groups returns every controller group of this build, in the order --help lists them.
func Groups() []manager.Group {
	return []manager.Group{
		machineapi.Group(),
		clusterapi.Group(),
		sim.Group(),
		aws.Group(),
		autoscaling.Group(),
		sync.Group(),
		migration.Group(),
		authorityhook.Group(),
		opsmetrics.Group(),
	}
}

// Select resolves a --controllers value against Groups (see manager.Select).
func Select(spec string) ([]manager.Group, error) {
	return manager.Select(Groups(), spec)
}
