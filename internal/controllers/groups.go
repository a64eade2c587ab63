// Package controllers is the one list of the controller groups built into machina. The
// manager package runs whichever of them --controllers selects but imports none of them;
// the command line (internal/cli) and the integration tests (internal/testenv) take the list
// from here. A new group is one more line in Groups (and a field of Settings when it has
// settings of its own).
package controllers

import (
	"github.com/machina-dev/machina/internal/authorityhook"
	"github.com/machina-dev/machina/internal/controllers/aws"
	"github.com/machina-dev/machina/internal/controllers/clusterapi"
	"github.com/machina-dev/machina/internal/controllers/machineapi"
	"github.com/machina-dev/machina/internal/controllers/migration"
	"github.com/machina-dev/machina/internal/controllers/sim"
	"github.com/machina-dev/machina/internal/controllers/sync"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/opsmetrics"
)

// Settings are the groups' own settings, each read only by its group: the command line sets
// them through the groups' AddFlags, tests directly.
type Settings struct {
	Sim       sim.Options
	AWS       aws.Options
	Admission authorityhook.Flags
}

// Groups returns every controller group of this build, in the order --help lists them; the
// groups read s (nil: a fresh, empty Settings) when they are set up, so flags parsed into it
// after this call count.
func Groups(s *Settings) []manager.Group {
	if s == nil {
		s = &Settings{}
	}
	return []manager.Group{
		machineapi.Group(),
		clusterapi.Group(),
		sim.Group(&s.Sim),
		aws.Group(&s.AWS),
		sync.Group(),
		migration.Group(),
		authorityhook.Group(&s.Admission),
		opsmetrics.Group(),
	}
}

// Select resolves a --controllers value against Groups(s) (see manager.Select).
func Select(s *Settings, spec string) ([]manager.Group, error) {
	return manager.Select(Groups(s), spec)
}
