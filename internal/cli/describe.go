package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"github.com/spf13/cobra"
	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/mapicond"
)

type describeFlags struct {
	kubeconfig string
	mapiNS     string
	capiNS     string
	color      string
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
terminal and left out when the output is piped (--color=always|never|auto).`,
		Example: `  machina describe
  machina describe cluster/lab --color=never`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDescribe(cmd.Context(), f, args, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, then in-cluster)")
	fl.StringVar(&f.mapiNS, "machine-api-namespace", manager.DefaultMachineAPINamespace, "namespace of the Machine API resources")
	fl.StringVar(&f.capiNS, "cluster-api-namespace", manager.DefaultClusterAPINamespace, "namespace of the Cluster API resources")
	fl.StringVar(&f.color, "color", "auto", "colour output: auto, always or never")
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
	cfg, err := restConfig(f.kubeconfig)
	if err != nil {
		return err
	}
	c, err := clusterClient(cfg)
	if err != nil {
		return err
	}
	var clusters clusterv1.ClusterList
	if err := c.List(ctx, &clusters, client.InNamespace(f.capiNS)); err != nil {
		return err
	}
	s, err := readSnapshot(ctx, c, f)
	if err != nil {
		return err
	}
	p := printer{out: out, color: f.color == "always" || (f.color == "auto" && isTerminal(out))}
	shown := 0
	for i := range clusters.Items {
		cl := &clusters.Items[i]
		if only != "" && cl.Name != only {
			continue
		}
		shown++
		p.cluster(cl, s)
	}
	if shown == 0 {
		if only != "" {
			return &ExitError{Code: 1, Err: fmt.Errorf("cluster %s not found in namespace %s", only, f.capiNS)}
		}
		fmt.Fprintf(out, "no Clusters in namespace %s\n", f.capiNS)
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

type printer struct {
	out   io.Writer
	color bool
}

func (p printer) paint(code, s string) string {
	if !p.color || s == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// health colours a value: green for good, yellow for in-between, red for bad.
func (p printer) health(s string, good, bad bool) string {
	switch {
	case good:
		return p.paint("32", s)
	case bad:
		return p.paint("31", s)
	}
	return p.paint("33", s)
}

func (p printer) cluster(cl *clusterv1.Cluster, s *snapshot) {
	prov := ptr.Deref(cl.Status.Initialization.InfrastructureProvisioned, false)
	fmt.Fprintf(p.out, "%s %s  infrastructure %s %s  %s\n", p.paint("1", "Cluster"), p.paint("1", cl.Name),
		cl.Spec.InfrastructureRef.Kind+"/"+cl.Spec.InfrastructureRef.Name, p.health(yesNo(prov, "provisioned", "not provisioned"), prov, false),
		pausedNote(p, cl.Spec.Paused != nil && *cl.Spec.Paused))
	names := map[string]bool{}
	for n := range s.mapiSets {
		names[n] = true
	}
	for n, ms := range s.capiSets {
		// A MachineDeployment's MachineSets are shown under it.
		if ms.Spec.ClusterName == cl.Name && ownerOf(ms.OwnerReferences, "MachineDeployment") == "" {
			names[n] = true
		}
	}
	var sets []string
	for n := range names {
		sets = append(sets, n)
	}
	sort.Strings(sets)
	owned := map[string]bool{}
	p.deployments(cl, s, owned)
	for i, n := range sets {
		last := i == len(sets)-1 && len(s.pools) == 0
		p.machineSet(n, s, "", last, owned)
	}
	for i := range s.pools {
		mp := &s.pools[i]
		if mp.Spec.ClusterName != cl.Name {
			continue
		}
		fmt.Fprintf(p.out, "└─ MachinePool %s  replicas %d/%d ready (Cluster API only)\n", mp.Name,
			ptr.Deref(mp.Status.ReadyReplicas, 0), ptr.Deref(mp.Spec.Replicas, 0))
		for _, n := range slices.Sorted(maps.Keys(s.capiMachines)) {
			if ref := ownerOf(s.capiMachines[n].OwnerReferences, "MachinePool"); ref == mp.Name {
				owned[n] = true
				p.machine(n, s, "   ")
			}
		}
	}
	var loose []string
	for n, m := range s.capiMachines {
		if !owned[n] && m.Spec.ClusterName == cl.Name {
			loose = append(loose, n)
		}
	}
	for n := range s.mapiMachines {
		if _, mirrored := s.capiMachines[n]; !owned[n] && !mirrored {
			loose = append(loose, n)
		}
	}
	if len(loose) > 0 {
		sort.Strings(loose)
		fmt.Fprintln(p.out, "Machines without a MachineSet or MachinePool")
		for _, n := range loose {
			p.machine(n, s, "  ")
		}
	}
}

func (p printer) machineSet(name string, s *snapshot, prefix string, last bool, owned map[string]bool) {
	branch, indent := prefix+"├─", prefix+"│  "
	if last {
		branch, indent = prefix+"└─", prefix+"   "
	}
	mapi, capi := s.mapiSets[name], s.capiSets[name]
	var parts []string
	if mapi != nil {
		parts = append(parts, p.authority(mapi.Status.AuthoritativeAPI, mapi.Spec.AuthoritativeAPI),
			p.synchronized(mapi.Status.Conditions),
			fmt.Sprintf("MAPI %d/%d ready", mapi.Status.ReadyReplicas, ptr.Deref(mapi.Spec.Replicas, 1)))
		if c := mapicond.Get(mapi.Status.Conditions, "AuthorityMigration"); c != nil && c.Status != corev1.ConditionTrue {
			parts = append(parts, p.paint("33", "migration: "+c.Message))
		}
	} else {
		parts = append(parts, "Cluster API only")
	}
	if capi != nil {
		parts = append(parts, fmt.Sprintf("CAPI %d/%d ready", ptr.Deref(capi.Status.ReadyReplicas, 0), ptr.Deref(capi.Spec.Replicas, 0)))
		if rev, ok := capi.Annotations[clusterv1.RevisionAnnotation]; ok {
			parts = append(parts, "revision "+rev)
		}
		if _, paused := capi.Annotations[clusterv1.PausedAnnotation]; paused {
			parts = append(parts, p.paint("2", "CAPI paused"))
		}
	}
	fmt.Fprintf(p.out, "%s MachineSet %s  %s\n", branch, p.paint("1", name), strings.Join(parts, "  "))
	var machines []string
	for n, m := range s.mapiMachines {
		if ownerOf(m.OwnerReferences, "MachineSet") == name {
			machines = append(machines, n)
		}
	}
	for n, m := range s.capiMachines {
		if _, ok := s.mapiMachines[n]; !ok && ownerOf(m.OwnerReferences, "MachineSet") == name {
			machines = append(machines, n)
		}
	}
	sort.Strings(machines)
	for _, n := range machines {
		owned[n] = true
		p.machine(n, s, indent)
	}
}

func (p printer) machine(name string, s *snapshot, indent string) {
	mapi, capi := s.mapiMachines[name], s.capiMachines[name]
	var parts []string
	node := ""
	if mapi != nil {
		phase := ptr.Deref(mapi.Status.Phase, "-")
		parts = append(parts, p.authority(mapi.Status.AuthoritativeAPI, mapi.Spec.AuthoritativeAPI), p.synchronized(mapi.Status.Conditions),
			"MAPI "+p.health(phase, phase == "Running", phase == "Failed"))
		if mapi.Status.NodeRef != nil {
			node = mapi.Status.NodeRef.Name
		}
		if e := ptr.Deref(mapi.Status.ErrorMessage, ""); e != "" {
			parts = append(parts, p.paint("31", e))
		}
	}
	if capi != nil {
		phase := capi.Status.Phase
		if phase == "" {
			phase = "-"
		}
		parts = append(parts, "CAPI "+p.health(phase, phase == "Running", phase == "Failed"))
		if node == "" {
			node = capi.Status.NodeRef.Name
		}
	}
	fmt.Fprintf(p.out, "%s├─ Machine %s  %s\n", indent, name, strings.Join(parts, "  "))
	if n, ok := s.nodes[node]; ok {
		ready := nodeReady(n)
		fmt.Fprintf(p.out, "%s│  └─ Node %s  %s\n", indent, n.Name, p.health(yesNo(ready, "Ready", "NotReady"), ready, !ready))
	}
}

func (p printer) authority(status, spec machinev1beta1.MachineAuthority) string {
	s := "authority " + string(status)
	if status == "" {
		s = "authority undecided"
	}
	if spec != "" && spec != status {
		s += " → " + string(spec)
		return p.paint("33", s)
	}
	return s
}

func (p printer) synchronized(conds []machinev1beta1.Condition) string {
	c := mapicond.Get(conds, authority.SynchronizedCondition)
	switch {
	case c == nil:
		return p.paint("33", "Synchronized ?")
	case c.Status == corev1.ConditionTrue:
		return p.paint("32", "Synchronized")
	default:
		return p.paint("31", "NOT Synchronized: "+c.Message)
	}
}

func pausedNote(p printer, paused bool) string {
	if paused {
		return p.paint("33", "paused")
	}
	return ""
}

func ownerOf(refs []metav1OwnerReference, kind string) string {
	for _, r := range refs {
		if r.Kind == kind && r.Controller != nil && *r.Controller {
			return r.Name
		}
	}
	return ""
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func yesNo(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}
