// Package cli holds machina's command-line interface. Each command lives in its own file;
// NewRootCommand lists them.
package cli

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// verbosity is the value of the persistent --verbosity flag.
var verbosity int

// ExitError carries a process exit code and a message for the user.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// NewRootCommand builds the machina command tree.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "machina",
		Short: "Machine lifecycle for Kubernetes: Machine API, Cluster API, and migration between them",
		Long: `machina runs the machine layer of a Kubernetes cluster: the OpenShift Machine API
(machine.openshift.io) and the Cluster API (cluster.x-k8s.io) controllers side by side, keeps
their objects in sync, and hands authority over a Machine, MachineSet or MachineHealthCheck
from one API to the other without disturbing the cloud instances underneath.

Start here:
  machina up          a complete lab on this machine: kube-apiserver, etcd, the simulated
                      cloud and every controller; prints the KUBECONFIG to use
  machina manager     run the controllers against an existing cluster
  machina plan        which Machine API resources can move to the Cluster API today
  machina migrate     hand a Machine, MachineSet or MachineHealthCheck to the other API
  machina describe    a cluster's machines in both APIs side by side
  machina convert     what Machine API YAML becomes in the Cluster API, offline
  machina version     print the version`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			if cmd.Name() != "up" { // machina up logs to a file in its state directory
				setupLogging(verbosity)
			}
		},
	}
	root.PersistentFlags().IntVarP(&verbosity, "verbosity", "v", 0, "log verbosity of controllers and clients (0 = info)")
	root.AddCommand(newUpCommand(), newManagerCommand(), newPlanCommand(), newMigrateCommand(), newDescribeCommand(),
		newConvertCommand(), newCloudCommand(), newVersionCommand(), newLabBinariesCommand())
	return root
}

// Execute runs the command line and returns the process exit code.
func Execute() int {
	err := NewRootCommand().Execute()
	if err == nil {
		return 0
	}
	fmt.Fprintln(os.Stderr, "Error:", err)
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return 1
}
