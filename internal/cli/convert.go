package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/document"
	"github.com/machina-dev/machina/internal/provider"
)

// Exit codes of machina convert.
const (
	convertExitNotConvertible = 1
	convertExitBadInput       = 2
)

type convertOptions struct {
	file, infrastructure, to, output string
	clusterName, region              string
	mapiNamespace, capiNamespace     string
	syncLabels                       []string
}

func newConvertCommand() *cobra.Command {
	o := &convertOptions{}
	reg := provider.Builtin()
	cmd := &cobra.Command{
		Use:   "convert -f FILE|-",
		Short: "Convert Machines, MachineSets and MachineHealthChecks between the Machine API and the Cluster API, offline",
		Long: fmt.Sprintf(`convert reads Machine API (machine.openshift.io/v1beta1) or Cluster API (cluster.x-k8s.io/v1beta2)
Machines, MachineSets and MachineHealthChecks and prints what they become in the other API, ready for
kubectl apply. It needs no cluster: use it to check what your Machine configuration turns into before
anything changes.

Input is YAML or JSON: several documents separated by "---", a JSON stream, or Lists. A Cluster API
Machine or MachineSet is converted together with the InfraMachine or InfraMachineTemplate it
references, which must be in the input. Converting to the Cluster API writes each InfraMachine or
InfraMachineTemplate before the object that references it. InfraMachineTemplates are named
<MachineSet name>-<hash of the template>, so converting an unchanged MachineSet again yields the
same name. The kinds read, each platform's as InfraMachine, InfraMachineTemplate, InfraCluster:
  %s

Cluster-wide values come from, in order: the flags; the objects in --infrastructure (an OpenShift
Infrastructure object for the cluster name and, when its platform status has one, the region; the
platform's InfraCluster for the region); and, failing those, the input itself (the
machine.openshift.io/cluster-api-cluster label or spec.clusterName, and the providerSpec region),
which is then noted in the report.

The report goes to standard error: one line per object, then one line per problem with the field path
of the value. Errors are values the other API cannot carry; warnings are lossy but safe choices.

Exit status: 0 everything converted; 1 some object is not convertible (the others are still printed);
2 bad input (unparsable, unknown kind, no cluster name or region to be found), with the document named.`,
			strings.Join(document.KnownKinds(reg), "\n  ")),
		Example: `  # What does this MachineSet become in the Cluster API?
  machina convert -f worker-us-east-1a.yaml --infrastructure infrastructure.yaml

  # Straight from a cluster, no flags needed for installer-made MachineSets:
  oc get machinesets -n openshift-machine-api -o yaml | machina convert -f -

  # Back from the Cluster API, for the simulated cloud:
  machina convert -f capi.yaml --to machineapi --cluster-name lab-7x2kq --region sim-east-1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runConvert(cmd, o, reg)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.file, "filename", "f", "", `file to convert, or "-" for standard input (required)`)
	f.StringVar(&o.to, "to", "", `API to convert to: "clusterapi" or "machineapi" (default: the other API of each object)`)
	f.StringVar(&o.infrastructure, "infrastructure", "", "file with cluster-wide objects: an OpenShift Infrastructure (cluster name, region when its platform status has one) or an InfraCluster ("+infraKinds(reg, func(p provider.Provider) string { return p.InfraCluster.Kind })+"; region)")
	f.StringVarP(&o.output, "output", "o", "yaml", `output format: "yaml" or "json"`)
	f.StringVar(&o.clusterName, "cluster-name", "", "Cluster API cluster name (the Infrastructure's status.infrastructureName on OpenShift)")
	f.StringVar(&o.region, "region", "", "the cluster's region (AWS region, or the simulated cloud's region)")
	f.StringVar(&o.mapiNamespace, "machine-api-namespace", convert.OpenShiftNamespaces.MachineAPI, "namespace of Machine API objects; mapped to --cluster-api-namespace (other namespaces are kept)")
	f.StringVar(&o.capiNamespace, "cluster-api-namespace", convert.OpenShiftNamespaces.ClusterAPI, "namespace of Cluster API objects; mapped to --machine-api-namespace")
	f.StringSliceVar(&o.syncLabels, "additional-sync-machine-labels", nil, "regular expressions of further node label keys the Cluster API machine controller propagates (its own --additional-sync-machine-labels; give the manager the same); node labels matching none of them, nor node-role.kubernetes.io/*, node-restriction.kubernetes.io/* or node.cluster.x-k8s.io/*, cannot be converted, and the error names the expression that would admit each")
	return cmd
}

func badInput(err error) error { return &ExitError{Code: convertExitBadInput, Err: err} }

func runConvert(cmd *cobra.Command, o *convertOptions, reg *provider.Registry) error {
	if o.file == "" {
		return badInput(errors.New(`no input: give -f FILE, or -f - for standard input`))
	}
	opts := document.Options{
		ClusterName: o.clusterName,
		Region:      o.region,
		Namespaces:  convert.Namespaces{MachineAPI: o.mapiNamespace, ClusterAPI: o.capiNamespace},
		Providers:   reg,
	}
	switch strings.ToLower(strings.ReplaceAll(o.to, "-", "")) {
	case "":
	case "clusterapi", "capi":
		opts.To = document.ToClusterAPI
	case "machineapi", "mapi":
		opts.To = document.ToMachineAPI
	default:
		return badInput(fmt.Errorf(`--to %q: use "clusterapi" or "machineapi"`, o.to))
	}
	switch o.output {
	case "yaml", "json":
	default:
		return badInput(fmt.Errorf(`-o %q: use "yaml" or "json"`, o.output))
	}
	syncLabels, err := convert.ParseSyncMachineLabels(o.syncLabels)
	if err != nil {
		return badInput(err)
	}
	opts.AdditionalSyncMachineLabels = syncLabels
	if o.file == "-" && o.infrastructure == "-" {
		return badInput(errors.New("-f and --infrastructure cannot both read standard input"))
	}
	docs, err := readDocuments(cmd, o.file, reg)
	if err != nil {
		return err
	}
	if o.infrastructure != "" {
		ctx, err := readDocuments(cmd, o.infrastructure, reg)
		if err != nil {
			return err
		}
		opts.Context = ctx
	}
	res, err := document.Convert(docs, opts)
	if err != nil {
		return badInput(fmt.Errorf("%s: %w", o.file, err))
	}
	out, err := document.Marshal(res.Objects, o.output)
	if err != nil {
		return fmt.Errorf("writing the output: %w", err)
	}
	if _, err := cmd.OutOrStdout().Write(out); err != nil {
		return err
	}
	fmt.Fprint(cmd.ErrOrStderr(), document.WriteReport(res))
	if res.Failed() {
		n := 0
		for _, r := range res.Reports {
			if len(r.Errors) > 0 {
				n++
			}
		}
		return &ExitError{Code: convertExitNotConvertible, Err: fmt.Errorf("%d of %d objects could not be converted", n, len(res.Reports))}
	}
	return nil
}

// readDocuments decodes a file ("-" is standard input) with reg's platforms; problems are bad
// input (exit 2).
func readDocuments(cmd *cobra.Command, path string, reg *provider.Registry) ([]document.Document, error) {
	var r io.Reader
	if path == "-" {
		r = cmd.InOrStdin()
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, badInput(err)
		}
		defer f.Close()
		r = f
	}
	docs, err := document.DecodeWith(r, reg)
	if err != nil {
		return nil, badInput(fmt.Errorf("%s: %w", displayName(path), err))
	}
	if len(docs) == 0 {
		return nil, badInput(fmt.Errorf("%s: no objects", displayName(path)))
	}
	return docs, nil
}

func displayName(path string) string {
	if path == "-" {
		return "standard input"
	}
	return path
}

// infraKinds lists one infrastructure kind of each of reg's platforms, e.g.
// "AWSCluster/SimCluster", for help texts.
func infraKinds(reg *provider.Registry, kind func(provider.Provider) string) string {
	ps := reg.All()
	kinds := make([]string, len(ps))
	for i, p := range ps {
		kinds[i] = kind(p)
	}
	slices.Sort(kinds)
	return strings.Join(kinds, "/")
}
