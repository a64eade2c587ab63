package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/document"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/provider"
)

// Exit codes of machina plan.
const (
	planExitBlocked  = 1
	planExitBadInput = 2
)

type planFlags struct {
	kubeconfig     string
	files          []string
	infrastructure string
	to             string
	mapiNS, capiNS string
	clusterName    string
	region         string
}

func newPlanCommand() *cobra.Command {
	f := &planFlags{}
	cmd := &cobra.Command{
		Use:   "plan [-f FILE]... [--to ClusterAPI|MachineAPI]",
		Short: "Report which Machine API resources can migrate today, and what blocks the others",
		Long: `plan checks every Machine API Machine, MachineSet and MachineHealthCheck and says whether
'machina migrate' could hand it to the other API today. For each resource that cannot move it
lists what blocks it: each field the other API cannot carry, with its full path, and, against a
live cluster, the synchronisation state the migration controller insists on (a Synchronized
condition that is True, a mirror that has caught up with the latest generation, every Machine
of a MachineSet mirrored in both APIs).

Without -f it reads the cluster of the current kubeconfig. With -f it reads YAML or JSON files
instead (as 'machina convert' does) and checks conversion only; cluster-wide values come from
--infrastructure, --cluster-name and --region, or the input itself.

--to ClusterAPI (the default) checks resources the Machine API owns today; --to MachineAPI
checks the way back, converting each resource's Cluster API copy (from a cluster) or the Cluster
API objects given with -f.

Exit status: 0 every resource can migrate (or already has); 1 at least one is blocked; 2 bad
input or an unreadable cluster.`,
		Example: `  # Can this cluster's Machine API resources move to the Cluster API today?
  machina plan

  # The same question for YAML taken from a cluster that machina does not run in yet:
  oc get machinesets,machines -n openshift-machine-api -o yaml > mapi.yaml
  machina plan -f mapi.yaml --infrastructure infrastructure.yaml

  # And the way back:
  machina plan --to MachineAPI`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPlan(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, then in-cluster)")
	fl.StringArrayVarP(&f.files, "filename", "f", nil, `files to check instead of a cluster ("-" for standard input); repeatable`)
	fl.StringVar(&f.infrastructure, "infrastructure", "", "with -f: file with cluster-wide objects (an Infrastructure or an InfraCluster: "+
		infraKinds(provider.Builtin(), func(p provider.Provider) string { return p.InfraCluster.Kind })+")")
	fl.StringVar(&f.to, "to", "ClusterAPI", "the API to check a move to: ClusterAPI or MachineAPI")
	fl.StringVar(&f.mapiNS, "machine-api-namespace", manager.DefaultMachineAPINamespace, "namespace of the Machine API resources")
	fl.StringVar(&f.capiNS, "cluster-api-namespace", manager.DefaultClusterAPINamespace, "namespace of the Cluster API resources")
	fl.StringVar(&f.clusterName, "cluster-name", "", "with -f: the Cluster API cluster name")
	fl.StringVar(&f.region, "region", "", "with -f: the cluster's region")
	return cmd
}

// planItem is the verdict on one resource.
type planItem struct {
	kind, name string
	authority  string // where it stands now, "" offline
	done       bool   // already with the target API
	blockers   []string
	notes      []string
}

func (i planItem) verdict() string {
	switch {
	case i.done:
		return "already there"
	case len(i.blockers) > 0:
		return "blocked"
	}
	return "ready"
}

func runPlan(cmd *cobra.Command, f *planFlags) error {
	var to machinev1beta1.MachineAuthority
	switch strings.ToLower(f.to) {
	case "clusterapi", "capi":
		to = machinev1beta1.MachineAuthorityClusterAPI
	case "machineapi", "mapi":
		to = machinev1beta1.MachineAuthorityMachineAPI
	default:
		return &ExitError{Code: planExitBadInput, Err: fmt.Errorf("--to %q: want ClusterAPI or MachineAPI", f.to)}
	}
	var items []planItem
	var notes []string
	var err error
	if len(f.files) > 0 {
		items, notes, err = planFiles(cmd, f, to)
	} else {
		if f.infrastructure != "" || f.clusterName != "" || f.region != "" {
			return &ExitError{Code: planExitBadInput, Err: fmt.Errorf("--infrastructure, --cluster-name and --region only apply with -f")}
		}
		ctx, stop := signalContext(cmd.Context())
		defer stop()
		items, err = planCluster(ctx, f, to)
		if err == nil {
			notes = append(notes, fmt.Sprintf("read from the cluster: Machine API namespace %s, Cluster API namespace %s", f.mapiNS, f.capiNS))
		}
	}
	if err != nil {
		return err
	}
	blocked := writePlan(cmd.OutOrStdout(), items, notes, to)
	if blocked > 0 {
		return &ExitError{Code: planExitBlocked, Err: fmt.Errorf("%d of %d resource(s) cannot migrate to %s yet", blocked, len(items), to)}
	}
	return nil
}

// planFiles checks the conversion of the objects in files.
func planFiles(cmd *cobra.Command, f *planFlags, to machinev1beta1.MachineAuthority) ([]planItem, []string, error) {
	reg := provider.Builtin()
	var docs []document.Document
	for _, path := range f.files {
		d, err := readDocuments(cmd, path, reg)
		if err != nil {
			return nil, nil, &ExitError{Code: planExitBadInput, Err: err}
		}
		if len(f.files) > 1 {
			for i := range d {
				d[i].Where = displayName(path) + ", " + d[i].Where
			}
		}
		docs = append(docs, d...)
	}
	opts := document.Options{
		ClusterName: f.clusterName,
		Region:      f.region,
		Namespaces:  convert.Namespaces{MachineAPI: f.mapiNS, ClusterAPI: f.capiNS},
		To:          document.ToClusterAPI,
		Providers:   reg,
	}
	if to == machinev1beta1.MachineAuthorityMachineAPI {
		opts.To = document.ToMachineAPI
	}
	if f.infrastructure != "" {
		ctx, err := readDocuments(cmd, f.infrastructure, reg)
		if err != nil {
			return nil, nil, &ExitError{Code: planExitBadInput, Err: err}
		}
		opts.Context = ctx
	}
	res, err := document.Convert(docs, opts)
	if err != nil {
		return nil, nil, &ExitError{Code: planExitBadInput, Err: err}
	}
	items := make([]planItem, 0, len(res.Reports))
	for _, r := range res.Reports {
		it := planItem{kind: r.Kind, name: r.Name, notes: r.Warnings}
		for _, e := range r.Errors {
			it.blockers = append(it.blockers, e.Error())
		}
		items = append(items, it)
	}
	notes := append([]string{"offline: conversion checked only; against a cluster plan also checks synchronisation"}, res.Notes...)
	return items, notes, nil
}

// writePlan prints the table and the reasons, returning how many resources are blocked.
func writePlan(out io.Writer, items []planItem, notes []string, to machinev1beta1.MachineAuthority) int {
	sort.SliceStable(items, func(a, b int) bool {
		if items[a].kind != items[b].kind {
			return kindOrder(items[a].kind) < kindOrder(items[b].kind)
		}
		return items[a].name < items[b].name
	})
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	showAuthority := false
	for _, it := range items {
		if it.authority != "" {
			showAuthority = true
		}
	}
	if showAuthority {
		fmt.Fprintf(tw, "KIND\tNAME\tAUTHORITY\tTO %s\n", to)
	} else {
		fmt.Fprintf(tw, "KIND\tNAME\tTO %s\n", to)
	}
	blocked, ready, done := 0, 0, 0
	for _, it := range items {
		if showAuthority {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", it.kind, it.name, it.authority, it.verdict())
		} else {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", it.kind, it.name, it.verdict())
		}
		switch {
		case it.done:
			done++
		case len(it.blockers) > 0:
			blocked++
		default:
			ready++
		}
	}
	tw.Flush()
	for _, it := range items {
		if len(it.blockers) == 0 && len(it.notes) == 0 {
			continue
		}
		fmt.Fprintf(out, "\n%s %s:\n", it.kind, it.name)
		for _, b := range it.blockers {
			fmt.Fprintf(out, "  blocks: %s\n", b)
		}
		for _, n := range it.notes {
			fmt.Fprintf(out, "  note:   %s\n", n)
		}
	}
	fmt.Fprintln(out)
	for _, n := range notes {
		fmt.Fprintf(out, "%s\n", n)
	}
	fmt.Fprintf(out, "%d ready, %d blocked, %d already %s-authoritative\n", ready, blocked, done, to)
	return blocked
}

func kindOrder(k string) int {
	switch k {
	case "MachineSet":
		return 0
	case "Machine":
		return 1
	}
	return 2
}

// conditionBlocker explains a Synchronized condition that is not True, or "" when it is.
func conditionBlocker(conds []machinev1beta1.Condition, cond machinev1beta1.ConditionType) string {
	for _, c := range conds {
		if c.Type != cond {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			return ""
		}
		msg := c.Message
		if msg == "" {
			msg = c.Reason
		}
		return fmt.Sprintf("not synchronised (%s): %s", c.Reason, msg)
	}
	return "not synchronised yet: no " + string(cond) + " condition (is machina's sync controller running?)"
}
