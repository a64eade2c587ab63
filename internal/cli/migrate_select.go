package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/fleet"
)

type target struct {
	kind, name string
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
			out = append(out, target{kind: fleet.Machine, name: name})
		case "machineset", "machinesets", "ms", "machineset.machine.openshift.io":
			out = append(out, target{kind: fleet.MachineSet, name: name})
		case "machinehealthcheck", "machinehealthchecks", "mhc", "machinehealthcheck.machine.openshift.io":
			out = append(out, target{kind: fleet.MachineHealthCheck, name: name})
		default:
			return nil, fmt.Errorf("%q: unknown kind %q: want machine, machineset or machinehealthcheck", a, kind)
		}
	}
	return out, nil
}

// selectFleet returns the resources to move and those left out with the reason (blocked,
// already moved). A named resource that does not exist is an error before anything is asked.
func selectFleet(ctx context.Context, c client.Client, f *migrateFlags, args []string, to machinev1beta1.MachineAuthority) ([]fleet.Item, []fleet.Result, error) {
	if f.all || f.selector != "" {
		return selectReady(ctx, c, f, to)
	}
	targets, err := parseTargets(args)
	if err != nil {
		return nil, nil, &ExitError{Code: migrateExitBadInput, Err: err}
	}
	var items []fleet.Item
	for _, t := range targets {
		it := fleet.Item{Kind: t.kind, Name: t.name}
		if err := fleet.Exists(ctx, c, f.namespace, it); apierrors.IsNotFound(err) {
			return nil, nil, &ExitError{Code: 1, Err: fmt.Errorf("%s not found in namespace %s", it, f.namespace)}
		} else if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", it, err)
		}
		items = append(items, it)
	}
	if f.withMachines {
		return withMachines(ctx, c, f, items)
	}
	return items, nil, nil
}

// withMachines adds to items every Machine a MachineSet among them owns.
func withMachines(ctx context.Context, c client.Client, f *migrateFlags, items []fleet.Item) ([]fleet.Item, []fleet.Result, error) {
	var machines machinev1beta1.MachineList
	if err := c.List(ctx, &machines, client.InNamespace(f.namespace)); err != nil {
		return nil, nil, fmt.Errorf("listing Machines: %w", err)
	}
	out := items
	for _, it := range items {
		if it.Kind != fleet.MachineSet {
			continue
		}
		for i := range machines.Items {
			if ownerOf(machines.Items[i].OwnerReferences, "MachineSet") == it.Name {
				out = append(out, fleet.Item{Kind: fleet.Machine, Name: machines.Items[i].Name})
			}
		}
	}
	return out, nil, nil
}

// selectReady is --all and -l: machina plan's verdict on every resource (matching the
// selector): the ready ones go in; those already moved, and the blocked ones with their first
// blocker, are left out.
func selectReady(ctx context.Context, c client.Client, f *migrateFlags, to machinev1beta1.MachineAuthority) ([]fleet.Item, []fleet.Result, error) {
	sel := labels.Everything()
	if f.selector != "" {
		var err error
		if sel, err = labels.Parse(f.selector); err != nil {
			return nil, nil, &ExitError{Code: migrateExitBadInput, Err: fmt.Errorf("-l %q: %w", f.selector, err)}
		}
	}
	matching, err := labelled(ctx, c, f.namespace, sel)
	if err != nil {
		return nil, nil, err
	}
	plan, err := planWith(ctx, c, authority.Namespaces{MachineAPI: f.namespace, ClusterAPI: f.capiNamespace}, to)
	if err != nil {
		return nil, nil, err
	}
	var items []fleet.Item
	var left []fleet.Result
	for _, p := range plan {
		it := fleet.Item{Kind: p.kind, Name: p.name}
		switch {
		case !matching[it]:
		case p.done:
			left = append(left, fleet.Result{Kind: p.kind, Name: p.name, From: p.authority, To: string(to), Result: fleet.Already,
				Reason: "already " + string(to) + "-authoritative"})
		case len(p.blockers) > 0:
			reason := p.blockers[0]
			if len(p.blockers) > 1 {
				reason += fmt.Sprintf(" (and %d more; see machina plan)", len(p.blockers)-1)
			}
			left = append(left, fleet.Result{Kind: p.kind, Name: p.name, From: p.authority, To: string(to), Result: fleet.Blocked, Reason: reason})
		default:
			items = append(items, it)
		}
	}
	return items, left, nil
}

// labelled returns the Machine API resources in ns whose labels match sel.
func labelled(ctx context.Context, c client.Client, ns string, sel labels.Selector) (map[fleet.Item]bool, error) {
	out := map[fleet.Item]bool{}
	for _, kind := range []string{fleet.MachineSet, fleet.Machine, fleet.MachineHealthCheck} {
		objs, err := fleet.List(ctx, c, ns, kind, client.MatchingLabelsSelector{Selector: sel})
		if err != nil {
			return nil, fmt.Errorf("reading the cluster: %w", err)
		}
		for name := range objs {
			out[fleet.Item{Kind: kind, Name: name}] = true
		}
	}
	return out, nil
}

// writeWaves is --dry-run: the waves in order and what is left out.
func writeWaves(out io.Writer, waves []fleet.Wave, skipped []fleet.Result, f *migrateFlags) {
	if len(waves) == 0 {
		fmt.Fprintln(out, "nothing to move")
	}
	for i, w := range waves {
		names := make([]string, len(w.Items))
		for j, it := range w.Items {
			names[j] = it.Name
		}
		fmt.Fprintf(out, "wave %d: %d %s(s), at most %d at a time: %s\n", i+1, len(w.Items), w.Kind, f.maxInFlight, strings.Join(names, ", "))
	}
	for _, s := range skipped {
		fmt.Fprintf(out, "left out: %s: %s: %s\n", fleet.Item{Kind: s.Kind, Name: s.Name}, s.Result, s.Reason)
	}
	fmt.Fprintln(out, "dry run: nothing was changed")
}
