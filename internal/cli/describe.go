package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"github.com/spf13/cobra"
	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/manager"
)

type describeFlags struct {
	kubeconfig string
	mapiNS     string
	capiNS     string
	color      string
	output     string
}

func newDescribeCommand() *cobra.Command {
	f := &describeFlags{}
	cmd := &cobra.Command{
		Use:   "describe [cluster/NAME]",
		Short: "Show a cluster's machines in both APIs side by side",
		Long: `Print a tree of a cluster: Cluster → MachineDeployments → MachineSets and MachinePools →
Machines → Nodes (a MachineDeployment with its revision and up-to-date counts), with
each resource's Machine API and Cluster API copies side by side: which API is authoritative,
whether the copies are Synchronized, their phases, and the conditions that explain a problem
(a failed conversion, a pending migration, a paused controller, an unhealthy Node).

Without an argument every Cluster in the Cluster API namespace is shown. Colour is used on a
terminal and left out when the output is piped (--color=always|never|auto).

For scripts, -o json or -o yaml prints the same information as one document,
{"clusters": [...]}: each Cluster with its machineDeployments (their machineSets under them),
machineSets, machinePools and the machines without either; each MachineSet and Machine with a
machineAPI side (authoritativeAPI spec and status, the Synchronized condition, phase or
replicas) and a clusterAPI side, a side left out when that API has no copy. --color is
ignored then.`,
		Example: `  machina describe
  machina describe cluster/lab --color=never
  machina describe -o json | jq -r '.clusters[].machineSets[] | select(.machineAPI.synchronized.status == "False") | .name'`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDescribe(cmd.Context(), f, args, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, then in-cluster)")
	fl.StringVar(&f.mapiNS, "machine-api-namespace", manager.DefaultMachineAPINamespace, "namespace of the Machine API resources")
	fl.StringVar(&f.capiNS, "cluster-api-namespace", manager.DefaultClusterAPINamespace, "namespace of the Cluster API resources")
	fl.StringVar(&f.color, "color", "auto", "colour output: auto, always or never (tree only)")
	fl.StringVarP(&f.output, "output", "o", describeTree, "output format: tree, json or yaml")
	return cmd
}

// snapshot is everything describe shows, read once.
type snapshot struct {
	mapiSets     map[string]*machinev1beta1.MachineSet
	capiSets     map[string]*clusterv1.MachineSet
	mapiMachines map[string]*machinev1beta1.Machine
	capiMachines map[string]*clusterv1.Machine
	pools        []clusterv1.MachinePool
	deployments  []clusterv1.MachineDeployment
	nodes        map[string]*corev1.Node
}

func runDescribe(ctx context.Context, f *describeFlags, args []string, out io.Writer) error {
	only := ""
	if len(args) == 1 {
		kind, name, ok := strings.Cut(args[0], "/")
		if !ok || !strings.EqualFold(kind, "cluster") || name == "" {
			return &ExitError{Code: 2, Err: fmt.Errorf("%q: want cluster/NAME", args[0])}
		}
		only = name
	}
	if err := checkDescribeOutput(f.output); err != nil {
		return err
	}
	cfg, err := restConfig(f.kubeconfig)
	if err != nil {
		return err
	}
	c, err := clusterClient(cfg)
	if err != nil {
		return err
	}
	return describe(ctx, c, f, only, out)
}

// describe reads the cluster once and prints the Clusters (all, or only the one named) in
// the format f.output asks for.
func describe(ctx context.Context, c client.Client, f *describeFlags, only string, out io.Writer) error {
	var clusters clusterv1.ClusterList
	if err := c.List(ctx, &clusters, client.InNamespace(f.capiNS)); err != nil {
		return err
	}
	s, err := readSnapshot(ctx, c, f)
	if err != nil {
		return err
	}
	views := describeClusters(clusters.Items, only, s)
	if len(views) == 0 && only != "" {
		return &ExitError{Code: 1, Err: fmt.Errorf("cluster %s not found in namespace %s", only, f.capiNS)}
	}
	if f.output == describeJSON || f.output == describeYAML {
		return writeDocument(out, f.output, views)
	}
	if len(views) == 0 {
		fmt.Fprintf(out, "no Clusters in namespace %s\n", f.capiNS)
	}
	p := printer{out: out, color: f.color == "always" || (f.color == "auto" && isTerminal(out))}
	for _, v := range views {
		p.cluster(v)
	}
	return nil
}

func readSnapshot(ctx context.Context, c client.Client, f *describeFlags) (*snapshot, error) {
	s := &snapshot{mapiSets: map[string]*machinev1beta1.MachineSet{}, capiSets: map[string]*clusterv1.MachineSet{},
		mapiMachines: map[string]*machinev1beta1.Machine{}, capiMachines: map[string]*clusterv1.Machine{}, nodes: map[string]*corev1.Node{}}
	var ms machinev1beta1.MachineSetList
	var cs clusterv1.MachineSetList
	var mm machinev1beta1.MachineList
	var cm clusterv1.MachineList
	var pools clusterv1.MachinePoolList
	var mds clusterv1.MachineDeploymentList
	var nodes corev1.NodeList
	for _, l := range []struct {
		list client.ObjectList
		ns   string
	}{{&ms, f.mapiNS}, {&cs, f.capiNS}, {&mm, f.mapiNS}, {&cm, f.capiNS}, {&pools, f.capiNS}, {&mds, f.capiNS}, {&nodes, ""}} {
		if err := c.List(ctx, l.list, client.InNamespace(l.ns)); err != nil {
			return nil, err
		}
	}
	for i := range ms.Items {
		s.mapiSets[ms.Items[i].Name] = &ms.Items[i]
	}
	for i := range cs.Items {
		s.capiSets[cs.Items[i].Name] = &cs.Items[i]
	}
	for i := range mm.Items {
		s.mapiMachines[mm.Items[i].Name] = &mm.Items[i]
	}
	for i := range cm.Items {
		s.capiMachines[cm.Items[i].Name] = &cm.Items[i]
	}
	for i := range nodes.Items {
		s.nodes[nodes.Items[i].Name] = &nodes.Items[i]
	}
	s.pools = pools.Items
	s.deployments = mds.Items
	return s, nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
