package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/machina-dev/machina/internal/lab"
)

func newLabBinariesCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "lab-binaries",
		Short: "Build (once) and print the lab's etcd, kube-apiserver and kube-controller-manager",
		Long: `Build the control-plane binaries the lab runs, from the Go modules machina pins, into
the cache directory ($MACHINA_CACHE_DIR, or machina/ under the user's cache directory), and
print where they are. machina up and the tests do this on demand; running it ahead of time
just moves the one-off build (about 5-6 minutes on 2 cores) out of the way.

The printed directory works as KUBEBUILDER_ASSETS for controller-runtime's envtest.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			b, err := lab.EnsureBinaries(ctx, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintln(out, b.Etcd)
			fmt.Fprintln(out, b.KubeAPIServer)
			fmt.Fprintln(out, b.KubeControllerManager)
			return nil
		},
	}
}
