package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/machina-dev/machina/internal/lab"
)

func newLabBinariesCommand() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "lab-binaries",
		Short: "Build (once) and print the lab's etcd, kube-apiserver and kube-controller-manager",
		Long: `Build the control-plane binaries the lab runs, from the Go modules machina pins, into
the cache directory ($MACHINA_CACHE_DIR, or machina/ under the user's cache directory), and
print where they are. machina up and the tests do this on demand; running it ahead of time
just moves the one-off build (about 5-6 minutes on 2 cores) out of the way.

With --all it also builds what the upstream labs and their tests run: the Cluster API
Provider AWS controller, the Cluster API core and clusterctl, machine-api-operator's Machine
API controllers and promtool (about 25 more minutes on 2 cores, once). CI runs it before the
tests, so that no test package spends its timeout waiting for another's build.

The first directory printed works as KUBEBUILDER_ASSETS for controller-runtime's envtest.`,
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
			if !all {
				return nil
			}
			return ensureUpstreamBinaries(ctx, out, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "also build the upstream controllers and tools the upstream labs and tests run")
	return cmd
}

// ensureUpstreamBinaries builds (or finds) each upstream build the labs use and prints where.
func ensureUpstreamBinaries(ctx context.Context, out, progress io.Writer) error {
	builds := []struct {
		name   string
		ensure func() (string, error)
	}{
		{"CAPA", func() (string, error) { b, err := lab.EnsureCAPA(ctx, progress); return b.Manager, err }},
		{"the Cluster API core", func() (string, error) { return lab.EnsureCAPICore(ctx, progress) }},
		{"clusterctl", func() (string, error) { return lab.EnsureClusterctl(ctx, progress) }},
		{"machine-api-operator", func() (string, error) { b, err := lab.EnsureMAO(ctx, progress); return b.Dir, err }},
		{"promtool", func() (string, error) { return lab.EnsurePromtool(ctx, progress) }},
	}
	for _, b := range builds {
		path, err := b.ensure()
		if err != nil {
			return fmt.Errorf("building %s: %w", b.name, err)
		}
		fmt.Fprintln(out, path)
	}
	return nil
}
