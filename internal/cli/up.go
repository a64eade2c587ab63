package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/machina-dev/machina/internal/flock"
	"github.com/machina-dev/machina/internal/lab"
)

func init() { addCommand(newUpCommand) }

type upFlags struct {
	stateDir string
	fresh    bool
}

func defaultStateDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ".machina"
	}
	return filepath.Join(d, "machina", "up")
}

func newUpCommand() *cobra.Command {
	f := &upFlags{}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a complete machina lab on this machine",
		Long: `Start a complete lab on this machine and keep it running until Ctrl-C:

  - a real etcd, kube-apiserver and kube-controller-manager (garbage collection,
    PodDisruptionBudgets, node lifecycle, namespaces),
  - every CRD machina serves: Machine API, Cluster API, config.openshift.io and the
    simulated provider's kinds.

The first run builds the control-plane binaries from source (about 5-6 minutes on 2 cores);
they are cached by version and later starts take a few seconds.

Everything the lab stores lives in --state-dir, so stopping and starting again keeps your
objects; --fresh starts from an empty lab. A file named kubeconfig in the state directory
lets kubectl (or any client) reach the lab.`,
		Example: `  machina up
  # in another terminal:
  export KUBECONFIG=~/.cache/machina/up/kubeconfig
  kubectl get machines.machine.openshift.io -A`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runUp(cmd.Context(), f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&f.stateDir, "state-dir", defaultStateDir(), "directory for the lab's data, logs and kubeconfig")
	cmd.Flags().BoolVar(&f.fresh, "fresh", false, "delete the lab's previous data before starting")
	return cmd
}

func runUp(ctx context.Context, f *upFlags, out, progress io.Writer) error {
	ctx, stop := signalContext(ctx)
	defer stop()
	dir, err := filepath.Abs(f.stateDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return &ExitError{Code: 2, Err: fmt.Errorf("--state-dir: %w", err)}
	}
	unlock, err := lockStateDir(dir)
	if err != nil {
		return err
	}
	defer unlock()
	if f.fresh {
		for _, sub := range []string{"etcd", "logs", "pki", "kubeconfig"} {
			if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
				return err
			}
		}
	}

	fmt.Fprintf(progress, "machina up: starting the lab in %s\n", dir)
	l, err := lab.Start(ctx, lab.Options{Dir: dir, ControllerManager: true, Progress: progress})
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(progress, "machina up: interrupted while starting; everything started so far is stopped")
			return nil
		}
		return err
	}
	defer func() {
		fmt.Fprintln(progress, "machina up: shutting down")
		l.Stop()
		fmt.Fprintln(progress, "machina up: stopped")
	}()

	fmt.Fprintf(out, `
machina lab is up. In another terminal:

  export KUBECONFIG=%s
  kubectl get machines.machine.openshift.io -A

Press Ctrl-C to stop. Data is kept in %s (logs in %s).
`, l.KubeconfigPath, dir, filepath.Join(dir, "logs"))

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if err := l.Failed(); err != nil {
				return fmt.Errorf("the lab failed: %w", err)
			}
		}
	}
}

// lockStateDir refuses a second `machina up` on the same state directory.
func lockStateDir(dir string) (func(), error) {
	unlock, err := flock.TryLock(filepath.Join(dir, "up.lock"))
	if errors.Is(err, flock.ErrLocked) {
		return nil, &ExitError{Code: 2, Err: fmt.Errorf("another machina up is already using %s (stop it, or pick another --state-dir)", dir)}
	}
	return unlock, err
}
