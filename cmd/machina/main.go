// Command machina is a machine-lifecycle control plane for Kubernetes: the Machine API and the
// Cluster API machine layer side by side, a simulated cloud, and live migration between them.
package main

import (
	"os"

	"github.com/machina-dev/machina/internal/cli"
)

func main() {
	os.Exit(cli.Execute())
}
