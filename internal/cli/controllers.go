package cli

// The controller groups built into machina register themselves when imported.
import (
	_ "github.com/machina-dev/machina/internal/controllers/machineapi"
)
