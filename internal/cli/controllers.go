package cli

// The controller groups built into machina register themselves when imported.
import (
	_ "github.com/machina-dev/machina/internal/authorityhook"
	_ "github.com/machina-dev/machina/internal/controllers/autoscaling"
	_ "github.com/machina-dev/machina/internal/controllers/clusterapi"
	_ "github.com/machina-dev/machina/internal/controllers/machineapi"
	_ "github.com/machina-dev/machina/internal/controllers/migration"
	_ "github.com/machina-dev/machina/internal/controllers/sim"
	_ "github.com/machina-dev/machina/internal/controllers/sync"
)
