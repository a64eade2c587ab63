package document

import (
	"fmt"
	"regexp"

	mapiv1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/provider"
)

// Direction is the API to convert to.
type Direction string

const (
	// ToOther converts each object to the API it is not in.
	ToOther Direction = ""
	// ToClusterAPI converts Machine API objects to the Cluster API.
	ToClusterAPI Direction = "clusterapi"
	// ToMachineAPI converts Cluster API objects to the Machine API.
	ToMachineAPI Direction = "machineapi"
)

// Options configure a conversion run.
type Options struct {
	To Direction
	// ClusterName and Region override what the context objects or the input say.
	ClusterName string
	Region      string
	// Namespaces maps the Machine API namespace to the Cluster API one.
	Namespaces convert.Namespaces
	// Context holds cluster-wide objects given separately: the Infrastructure and the
	// platforms' InfraClusters.
	Context []Document
	// Providers are the platforms conversion knows; provider.Builtin() when nil.
	Providers *provider.Registry
	// AdditionalSyncMachineLabels: see convert.Context.
	AdditionalSyncMachineLabels []*regexp.Regexp
}

// ObjectReport is the outcome for one input object.
type ObjectReport struct {
	Where    string
	Kind     string
	Name     string
	Warnings []string
	Errors   field.ErrorList
}

// Title names the object, e.g. "MachineSet openshift-machine-api/worker-a (document 2)".
func (r ObjectReport) Title() string {
	return fmt.Sprintf("%s %s (%s)", r.Kind, r.Name, r.Where)
}

// Result is the outcome of a run.
type Result struct {
	// Objects are the converted objects, in input order, each InfraMachine or
	// InfraMachineTemplate before the object that references it.
	Objects []client.Object
	// Reports has one entry per converted (or unconvertible) input object.
	Reports []ObjectReport
	// Notes say where cluster-wide values were taken from.
	Notes []string
}

// Failed reports whether any object could not be converted.
func (r *Result) Failed() bool {
	for _, o := range r.Reports {
		if len(o.Errors) > 0 {
			return true
		}
	}
	return false
}

type api int

const (
	apiNone api = iota
	apiMAPI
	apiCAPI
)

func apiOf(o client.Object) api {
	switch o.(type) {
	case *mapiv1.Machine, *mapiv1.MachineSet, *mapiv1.MachineHealthCheck:
		return apiMAPI
	case *clusterv1.Machine, *clusterv1.MachineSet, *clusterv1.MachineHealthCheck:
		return apiCAPI
	}
	return apiNone
}

func name(o client.Object) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}

func kindOf(o client.Object) string {
	switch o.(type) {
	case *mapiv1.Machine, *clusterv1.Machine:
		return "Machine"
	case *mapiv1.MachineSet, *clusterv1.MachineSet:
		return "MachineSet"
	case *mapiv1.MachineHealthCheck, *clusterv1.MachineHealthCheck:
		return "MachineHealthCheck"
	}
	return fmt.Sprintf("%T", o)
}

// Convert converts the Machine API and Cluster API objects among docs. Cluster-wide objects
// (the Infrastructure, InfraClusters) and InfraMachines are read as context. Problems with the
// input as a whole are returned as an *InputError; problems converting one object are in its
// report.
func Convert(docs []Document, opts Options) (*Result, error) {
	reg := orBuiltin(opts.Providers)
	res := &Result{}
	var work, infra []Document
	var ctxDocs []Document
	for _, d := range docs {
		switch apiOf(d.Object) {
		case apiMAPI:
			if opts.To == ToMachineAPI {
				return nil, &InputError{Where: d.Where, Err: fmt.Errorf("%s %s is already a Machine API object", kindOf(d.Object), name(d.Object))}
			}
			work = append(work, d)
		case apiCAPI:
			if opts.To == ToClusterAPI {
				return nil, &InputError{Where: d.Where, Err: fmt.Errorf("%s %s is already a Cluster API object", kindOf(d.Object), name(d.Object))}
			}
			work = append(work, d)
		default:
			if isClusterWide(d.Object, reg) {
				ctxDocs = append(ctxDocs, d)
				continue
			}
			if opts.To == ToClusterAPI {
				return nil, &InputError{Where: d.Where, Err: fmt.Errorf("%s %s is already a Cluster API object", d.Object.GetObjectKind().GroupVersionKind().Kind, name(d.Object))}
			}
			infra = append(infra, d)
		}
	}
	ctxDocs = append(ctxDocs, opts.Context...)
	cctx, err := buildContext(work, infra, ctxDocs, opts, reg, res)
	if err != nil {
		return nil, err
	}
	used := map[client.Object]bool{}
	for _, d := range work {
		rep := ObjectReport{Where: d.Where, Kind: kindOf(d.Object), Name: name(d.Object), Warnings: d.Warnings}
		var out []client.Object
		var w convert.Warnings
		var errs field.ErrorList
		switch o := d.Object.(type) {
		case *mapiv1.Machine:
			var c *convert.ClusterAPIMachine
			if c, w, errs = convert.ToClusterAPIMachine(o, cctx); c != nil {
				out = []client.Object{c.InfraMachine, c.Machine}
			}
		case *mapiv1.MachineSet:
			var c *convert.ClusterAPIMachineSet
			if c, w, errs = convert.ToClusterAPIMachineSet(o, cctx); c != nil {
				out = []client.Object{c.InfraMachineTemplate, c.MachineSet}
			}
		case *mapiv1.MachineHealthCheck:
			var c *clusterv1.MachineHealthCheck
			if c, w, errs = convert.ToClusterAPIMachineHealthCheck(o, cctx); c != nil {
				out = []client.Object{c}
			}
		case *clusterv1.Machine:
			im := findInfra(infra, o.Namespace, o.Spec.InfrastructureRef)
			used[im] = true
			var c *mapiv1.Machine
			if c, w, errs = convert.ToMachineAPIMachine(o, im, cctx); c != nil {
				out = []client.Object{c}
			}
		case *clusterv1.MachineSet:
			it := findInfra(infra, o.Namespace, o.Spec.Template.Spec.InfrastructureRef)
			used[it] = true
			var c *mapiv1.MachineSet
			if c, w, errs = convert.ToMachineAPIMachineSet(o, it, cctx); c != nil {
				out = []client.Object{c}
			}
		case *clusterv1.MachineHealthCheck:
			var c *mapiv1.MachineHealthCheck
			if c, w, errs = convert.ToMachineAPIMachineHealthCheck(o, cctx); c != nil {
				out = []client.Object{c}
			}
		}
		rep.Warnings = append(rep.Warnings, w.Strings()...)
		rep.Errors = errs
		res.Objects = append(res.Objects, out...)
		res.Reports = append(res.Reports, rep)
	}
	for _, d := range infra {
		if !used[d.Object] {
			res.Notes = append(res.Notes, fmt.Sprintf("%s: %s %s is not referenced by any Machine or MachineSet in the input; skipped", d.Where, d.Object.GetObjectKind().GroupVersionKind().Kind, name(d.Object)))
		}
	}
	return res, nil
}

// findInfra returns the InfraMachine (template) of the input that ref names, or nil.
func findInfra(infra []Document, ns string, ref clusterv1.ContractVersionedObjectReference) client.Object {
	for _, d := range infra {
		gvk := d.Object.GetObjectKind().GroupVersionKind()
		if gvk.Group == ref.APIGroup && gvk.Kind == ref.Kind && d.Object.GetName() == ref.Name &&
			(d.Object.GetNamespace() == ns || d.Object.GetNamespace() == "") {
			return d.Object
		}
	}
	return nil
}
