package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/version"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print machina's version and the control-plane versions its lab builds",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			fmt.Fprintln(out, version.String())
			fmt.Fprintf(out, "lab control plane: kube-apiserver/kube-controller-manager %s, etcd %s\n",
				lab.KubernetesVersion, lab.EtcdVersion)
			return nil
		},
	}
}
