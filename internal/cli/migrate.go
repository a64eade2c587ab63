package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/fleet"
	"github.com/machina-dev/machina/internal/manager"
)

// Exit codes of machina migrate besides 0 and 1.
const (
	migrateExitBadInput    = 2
	migrateExitInterrupted = 130
)

type migrateFlags struct {
	kubeconfig     string
	namespace      string
	capiNamespace  string
	to             string
	wait           bool
	timeout        time.Duration
	withMachines   bool
	all            bool
	selector       string
	maxInFlight    int
	pauseOnFailure bool
	dryRun         bool
	report         string
}

func newMigrateCommand() *cobra.Command {
	f := &migrateFlags{}
	cmd := &cobra.Command{
		Use:   "migrate (KIND/NAME... | --all | -l SELECTOR) --to ClusterAPI|MachineAPI",
		Short: "Move Machines, MachineSets and MachineHealthChecks, one or a whole fleet, between the Machine API and the Cluster API",
		Long: `Ask machina to hand authority over Machine API resources to the Cluster API, or back.

machina migrate sets spec.authoritativeAPI on each Machine API resource (for a
MachineHealthCheck, whose type has no such field, the machina.dev/authoritative-api
annotation); the migration controller then checks that the resource is synchronised, marks it
Migrating, pauses the old side's controllers, moves finalizers and lets the new side take
over. Nothing about the cloud instances changes.

Which resources:
  KIND/NAME...      the resources named; KIND is machine, machineset or machinehealthcheck
                    (plural and short forms work: machines, ms, mhc)
  --with-machines   with each MachineSet named, every Machine it owns (moving a MachineSet
                    does not move its Machines)
  --all             every resource 'machina plan' reports ready in the namespace; blocked
                    ones are listed with what blocks them and left alone
  -l SELECTOR       those of --all whose labels match (implies --all)

A fleet moves in waves: MachineSets, then Machines, then MachineHealthChecks, each wave
starting when the one before has finished, at most --max-in-flight handovers under way at
once (default 10: each takes the controllers about ten writes over a few seconds, so the
migration adds tens of writes a second to the API server, not hundreds). A resource that is
refused, cannot convert or does not finish within --timeout is a failure; with
--pause-on-failure (the default) no new request is made after it, what is in flight finishes,
and the command says what failed and exits 1. Run the same command again to go on: resources
that have moved already are skipped. Ctrl-C stops new requests at once and lists the
resources still in flight (their controllers finish them); exit status 130.

Progress: a bar on a terminal, a line per event otherwise. --report FILE writes every
resource's from, to, start, end, result and reason as JSON. --dry-run prints the waves and
changes nothing.

Named resources without --wait are only requested (the command does not wait); --all, -l and
--with-machines always wait.

Exit status: 0 every resource has the target API; 1 at least one failed, is blocked or was
left; 2 bad input; 130 interrupted.`,
		Example: `  # One MachineSet and its Machines:
  machina migrate machineset/lab-worker-a --with-machines --to ClusterAPI

  # The whole fleet, 20 at a time, with a record:
  machina migrate --all --to ClusterAPI --max-in-flight 20 --report migration.json

  # What would move, in which waves:
  machina migrate -l machine.openshift.io/cluster-api-machine-role=worker --to ClusterAPI --dry-run

  # Single resources, as before:
  machina migrate machine/lab-worker-a-x7k2p --to MachineAPI
  machina migrate mhc/lab-workers --to ClusterAPI --wait --timeout 2m`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMigrate(cmd.Context(), f, args, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, then in-cluster)")
	fl.StringVarP(&f.namespace, "namespace", "n", manager.DefaultMachineAPINamespace, "namespace of the Machine API resources")
	fl.StringVar(&f.capiNamespace, "cluster-api-namespace", manager.DefaultClusterAPINamespace, "namespace of the Cluster API resources (for --all's checks)")
	fl.StringVar(&f.to, "to", "", "the API to hand authority to: ClusterAPI or MachineAPI (required)")
	fl.BoolVar(&f.wait, "wait", false, "with named resources: wait until every one has moved, showing progress")
	fl.DurationVar(&f.timeout, "timeout", 5*time.Minute, "how long one resource may take to move before it counts as failed")
	fl.BoolVar(&f.withMachines, "with-machines", false, "also move every Machine each named MachineSet owns (after the MachineSet)")
	fl.BoolVar(&f.all, "all", false, "move every resource machina plan reports ready")
	fl.StringVarP(&f.selector, "selector", "l", "", "move the ready resources whose labels match this selector (implies --all)")
	fl.IntVar(&f.maxInFlight, "max-in-flight", fleet.DefaultMaxInFlight, "handovers under way at once")
	fl.BoolVar(&f.pauseOnFailure, "pause-on-failure", true, "stop making new requests after the first failure")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print the waves and change nothing")
	fl.StringVar(&f.report, "report", "", "write a JSON record of every resource to this file")
	return cmd
}

func runMigrate(ctx context.Context, f *migrateFlags, args []string, out io.Writer) error {
	to, err := f.validate(args)
	if err != nil {
		return &ExitError{Code: migrateExitBadInput, Err: err}
	}
	cfg, err := restConfig(f.kubeconfig)
	if err != nil {
		return err
	}
	c, err := clusterClient(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signalContext(ctx)
	defer stop()
	items, skipped, err := selectFleet(ctx, c, f, args, to)
	if err != nil {
		return err
	}
	waves := fleet.Waves(items)
	if f.dryRun {
		writeWaves(out, waves, skipped, f)
		return nil
	}
	if !f.wait && !f.fleet() {
		return requestOnly(ctx, c, f, items, to, out)
	}
	return runFleet(ctx, c, f, waves, skipped, to, out)
}

// fleet reports whether the command selects a fleet rather than naming resources.
func (f *migrateFlags) fleet() bool { return f.all || f.selector != "" || f.withMachines }

func (f *migrateFlags) validate(args []string) (machinev1beta1.MachineAuthority, error) {
	var to machinev1beta1.MachineAuthority
	switch strings.ToLower(f.to) {
	case "clusterapi":
		to = machinev1beta1.MachineAuthorityClusterAPI
	case "machineapi":
		to = machinev1beta1.MachineAuthorityMachineAPI
	default:
		return "", fmt.Errorf("--to: %q: want ClusterAPI or MachineAPI", f.to)
	}
	switch {
	case (f.all || f.selector != "") && len(args) > 0:
		return "", errors.New("name resources or select them with --all/-l, not both")
	case !f.all && f.selector == "" && len(args) == 0:
		return "", errors.New("name at least one resource (KIND/NAME), or use --all or -l SELECTOR")
	case f.withMachines && (f.all || f.selector != ""):
		return "", errors.New("--with-machines goes with named MachineSets; --all and -l already include the Machines")
	case f.maxInFlight < 1:
		return "", fmt.Errorf("--max-in-flight: %d: want at least 1", f.maxInFlight)
	case f.timeout <= 0:
		return "", fmt.Errorf("--timeout: %s: want a positive duration", f.timeout)
	}
	return to, nil
}

// requestOnly asks for each resource's move and returns, as migrate without --wait always did.
func requestOnly(ctx context.Context, c client.Client, f *migrateFlags, items []fleet.Item, to machinev1beta1.MachineAuthority, out io.Writer) error {
	for _, it := range items {
		if err := fleet.Request(ctx, c, f.namespace, it, to); err != nil {
			return &ExitError{Code: 1, Err: fmt.Errorf("%s: %w", it, err)}
		}
		fmt.Fprintf(out, "%s: authority requested: %s\n", it, to)
	}
	return nil
}

// runFleet runs the waves with progress, then prints the summary, writes the report and
// says how the run ended.
func runFleet(ctx context.Context, c client.Client, f *migrateFlags, waves []fleet.Wave, skipped []fleet.Result,
	to machinev1beta1.MachineAuthority, out io.Writer) error {
	p := fleet.NewProgress(out, isTerminal(out))
	rep, err := fleet.Run(ctx, c, waves, skipped, fleet.Options{Namespace: f.namespace, To: to, MaxInFlight: f.maxInFlight,
		Timeout: f.timeout, PauseOnFailure: f.pauseOnFailure, Events: p.Event})
	if err != nil {
		return err
	}
	fmt.Fprintln(out)
	rep.WriteSummary(out)
	if f.report != "" {
		if err := rep.WriteFile(f.report); err != nil {
			return &ExitError{Code: 1, Err: fmt.Errorf("--report: %w", err)}
		}
		fmt.Fprintf(out, "report written to %s\n", f.report)
	}
	if err := migrateOutcome(rep, to); err != nil {
		return err
	}
	fmt.Fprintf(out, "all %d resource(s) are %s-authoritative\n", len(rep.Resources)-rep.Count(fleet.Gone), to)
	return nil
}

// migrateOutcome is the command's ending: nil when every resource has the target API, else
// what was left and how to go on.
func migrateOutcome(rep *fleet.Report, to machinev1beta1.MachineAuthority) error {
	switch {
	case rep.Interrupted:
		var flying []string
		for _, r := range rep.Resources {
			if r.Result == fleet.InFlight {
				flying = append(flying, fleet.Item{Kind: r.Kind, Name: r.Name}.String())
			}
		}
		return &ExitError{Code: migrateExitInterrupted, Err: fmt.Errorf("interrupted: no new requests made; %d still in flight (their controllers finish them): %s; "+
			"run the same command again to go on", len(flying), strings.Join(flying, ", "))}
	case rep.PausedBy != "":
		return &ExitError{Code: 1, Err: fmt.Errorf("paused: %s; %d not started. Fix it (kubectl describe shows the resource's conditions) "+
			"and run the same command again: resources that have moved are skipped", rep.PausedBy, rep.Count(fleet.NotStarted))}
	case !rep.Complete():
		return &ExitError{Code: 1, Err: fmt.Errorf("%d of %d resource(s) did not move to %s (%d failed, %d blocked); see above",
			rep.Count(fleet.Failed)+rep.Count(fleet.Blocked), len(rep.Resources), to, rep.Count(fleet.Failed), rep.Count(fleet.Blocked))}
	}
	return nil
}
