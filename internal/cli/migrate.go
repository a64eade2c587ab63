package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/controllers/migration"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/mapicond"
)

type migrateFlags struct {
	kubeconfig string
	namespace  string
	to         string
	wait       bool
	timeout    time.Duration
}

func newMigrateCommand() *cobra.Command {
	f := &migrateFlags{}
	cmd := &cobra.Command{
		Use:   "migrate KIND/NAME... --to ClusterAPI|MachineAPI",
		Short: "Move Machines, MachineSets or MachineHealthChecks between the Machine API and the Cluster API",
		Long: `Ask machina to hand authority over Machine API resources to the Cluster API, or back.

machina migrate sets spec.authoritativeAPI on each Machine API resource named (for a
MachineHealthCheck, whose type has no such field, the machina.dev/authoritative-api
annotation); the migration controller then checks that the resource is synchronised, marks it
Migrating, pauses the old side's controllers, moves finalizers and lets the new side take
over. Nothing about the cloud instances changes.

KIND is machine, machineset or machinehealthcheck (plural and short forms work: machines,
ms, mhc). With --wait the command shows each resource's progress (synchronised, migrating,
paused, done) and exits non-zero if a resource cannot migrate (the reason is printed) or
--timeout passes. Without --wait it only records the request.`,
		Example: `  machina migrate machineset/lab-worker-a --to ClusterAPI --wait
  machina migrate machine/lab-worker-a-x7k2p machine/lab-worker-a-9fj3q --to MachineAPI
  machina migrate ms/lab-worker-a --to MachineAPI --wait --timeout 2m
  machina migrate machinehealthcheck/lab-workers --to ClusterAPI --wait`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMigrate(cmd.Context(), f, args, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, then in-cluster)")
	fl.StringVarP(&f.namespace, "namespace", "n", manager.DefaultMachineAPINamespace, "namespace of the Machine API resources")
	fl.StringVar(&f.to, "to", "", "the API to hand authority to: ClusterAPI or MachineAPI (required)")
	fl.BoolVar(&f.wait, "wait", false, "wait until every resource has moved, showing progress")
	fl.DurationVar(&f.timeout, "timeout", 5*time.Minute, "how long --wait waits")
	return cmd
}

type target struct {
	kind, name string
	obj        client.Object
}

func parseTargets(args []string) ([]target, error) {
	var out []target
	for _, a := range args {
		kind, name, ok := strings.Cut(a, "/")
		if !ok || name == "" {
			return nil, fmt.Errorf("%q: want KIND/NAME, for example machineset/lab-worker-a", a)
		}
		switch strings.ToLower(kind) {
		case "machine", "machines", "machine.machine.openshift.io":
			out = append(out, target{kind: "Machine", name: name, obj: &machinev1beta1.Machine{}})
		case "machineset", "machinesets", "ms", "machineset.machine.openshift.io":
			out = append(out, target{kind: "MachineSet", name: name, obj: &machinev1beta1.MachineSet{}})
		case "machinehealthcheck", "machinehealthchecks", "mhc", "machinehealthcheck.machine.openshift.io":
			out = append(out, target{kind: "MachineHealthCheck", name: name, obj: &machinev1beta1.MachineHealthCheck{}})
		default:
			return nil, fmt.Errorf("%q: unknown kind %q: want machine, machineset or machinehealthcheck", a, kind)
		}
	}
	return out, nil
}

func runMigrate(ctx context.Context, f *migrateFlags, args []string, out io.Writer) error {
	var to machinev1beta1.MachineAuthority
	switch strings.ToLower(f.to) {
	case "clusterapi":
		to = machinev1beta1.MachineAuthorityClusterAPI
	case "machineapi":
		to = machinev1beta1.MachineAuthorityMachineAPI
	default:
		return &ExitError{Code: 2, Err: fmt.Errorf("--to: %q: want ClusterAPI or MachineAPI", f.to)}
	}
	targets, err := parseTargets(args)
	if err != nil {
		return &ExitError{Code: 2, Err: err}
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
	for _, t := range targets {
		if err := c.Get(ctx, client.ObjectKey{Namespace: f.namespace, Name: t.name}, t.obj); err != nil {
			if apierrors.IsNotFound(err) {
				return &ExitError{Code: 1, Err: fmt.Errorf("%s %s/%s not found", t.kind, f.namespace, t.name)}
			}
			return err
		}
		base := t.obj.DeepCopyObject().(client.Object)
		switch o := t.obj.(type) {
		case *machinev1beta1.Machine:
			o.Spec.AuthoritativeAPI = to
		case *machinev1beta1.MachineSet:
			o.Spec.AuthoritativeAPI = to
		case *machinev1beta1.MachineHealthCheck:
			o.Annotations = authority.MergeMap(o.Annotations, map[string]string{authority.MHCAuthoritativeAPIAnnotation: string(to)})
		}
		if err := c.Patch(ctx, t.obj, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("%s %s: %w", t.kind, t.name, err)
		}
		fmt.Fprintf(out, "%s/%s: authority requested: %s\n", strings.ToLower(t.kind), t.name, to)
	}
	if !f.wait {
		return nil
	}
	return waitMigrated(ctx, c, f, targets, to, out)
}

// waitMigrated polls until every target reports the new authority, printing each change of
// state once, and fails on a resource that cannot convert.
func waitMigrated(ctx context.Context, c client.Client, f *migrateFlags, targets []target, to machinev1beta1.MachineAuthority, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	last := map[string]string{}
	start := time.Now()
	for {
		done := 0
		for _, t := range targets {
			if err := c.Get(ctx, client.ObjectKey{Namespace: f.namespace, Name: t.name}, t.obj); err != nil {
				if ctx.Err() != nil {
					break
				}
				return err
			}
			state, finished, failure := progress(t.obj, to)
			key := strings.ToLower(t.kind) + "/" + t.name
			if state != last[key] {
				fmt.Fprintf(out, "%s: %s (%s)\n", key, state, time.Since(start).Round(time.Second))
				last[key] = state
			}
			if failure != "" {
				return &ExitError{Code: 1, Err: fmt.Errorf("%s cannot migrate to %s: %s", key, to, failure)}
			}
			if finished {
				done++
			}
		}
		if done == len(targets) {
			fmt.Fprintf(out, "all %d resource(s) are %s-authoritative\n", done, to)
			return nil
		}
		select {
		case <-ctx.Done():
			return &ExitError{Code: 1, Err: fmt.Errorf("timed out after %s waiting for %d of %d resource(s); see kubectl describe for their conditions",
				f.timeout, len(targets)-done, len(targets))}
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// progress describes where one resource stands.
func progress(o client.Object, to machinev1beta1.MachineAuthority) (state string, done bool, failure string) {
	var status machinev1beta1.MachineAuthority
	var conds []machinev1beta1.Condition
	switch x := o.(type) {
	case *machinev1beta1.Machine:
		status, conds = x.Status.AuthoritativeAPI, x.Status.Conditions
	case *machinev1beta1.MachineSet:
		status, conds = x.Status.AuthoritativeAPI, x.Status.Conditions
	case *machinev1beta1.MachineHealthCheck:
		status, conds = machinev1beta1.MachineAuthority(x.Annotations[authority.MHCStatusAuthoritativeAPIAnnotation]), x.Status.Conditions
	}
	if status == to {
		return "done", true, ""
	}
	if s := mapicond.Get(conds, authority.SynchronizedCondition); s != nil && s.Reason == authority.ConversionFailedReason {
		return "not synchronised", false, s.Message
	}
	m := mapicond.Get(conds, migration.MigrationCondition)
	switch {
	case status == machinev1beta1.MachineAuthorityMigrating && m != nil && m.Reason == migration.WaitingForPausedReason:
		return "migrating: pausing the old side", false, ""
	case status == machinev1beta1.MachineAuthorityMigrating && m != nil && m.Reason == migration.WaitingForSyncReason:
		return "migrating: synchronising", false, ""
	case status == machinev1beta1.MachineAuthorityMigrating:
		return "migrating", false, ""
	case m != nil && m.Reason == migration.NotSynchronizedReason:
		return "waiting to be synchronised: " + m.Message, false, ""
	}
	return "synchronised, waiting for the migration controller", false, ""
}
