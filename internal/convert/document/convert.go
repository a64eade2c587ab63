package document

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	mapiv1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	capav1 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	simv1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/convert/providers/aws"
	"github.com/machina-dev/machina/internal/convert/providers/sim"
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
	// Context holds cluster-wide objects given separately (Infrastructure, AWSCluster, SimCluster).
	Context []Document
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
// (Infrastructure, AWSCluster, SimCluster) and InfraMachines are read as context. Problems
// with the input as a whole are returned as an *InputError; problems converting one object
// are in its report.
func Convert(docs []Document, opts Options) (*Result, error) {
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
			switch d.Object.(type) {
			case *configv1.Infrastructure, *capav1.AWSCluster, *simv1.SimCluster:
				ctxDocs = append(ctxDocs, d)
			default:
				if opts.To == ToClusterAPI {
					return nil, &InputError{Where: d.Where, Err: fmt.Errorf("%s %s is already a Cluster API object", d.Object.GetObjectKind().GroupVersionKind().Kind, name(d.Object))}
				}
				infra = append(infra, d)
			}
		}
	}
	ctxDocs = append(ctxDocs, opts.Context...)
	cctx, err := buildContext(work, infra, ctxDocs, opts, res)
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

// buildContext works out the cluster name and platform from the options, the context
// objects and, failing those, the input itself (recording a note when it does).
func buildContext(work, infra, ctxDocs []Document, opts Options, res *Result) (convert.Context, error) {
	c := convert.Context{Namespaces: opts.Namespaces, AdditionalSyncMachineLabels: opts.AdditionalSyncMachineLabels}
	var infraObj *configv1.Infrastructure
	var awsCluster *capav1.AWSCluster
	var simCluster *simv1.SimCluster
	for _, d := range ctxDocs {
		switch o := d.Object.(type) {
		case *configv1.Infrastructure:
			infraObj = o
		case *capav1.AWSCluster:
			awsCluster = o
		case *simv1.SimCluster:
			simCluster = o
		}
	}

	// Cluster name.
	switch {
	case opts.ClusterName != "":
		c.ClusterName = opts.ClusterName
	case infraObj != nil && infraObj.Status.InfrastructureName != "":
		c.ClusterName = infraObj.Status.InfrastructureName
	default:
		for _, d := range work {
			var v, from string
			switch o := d.Object.(type) {
			case *mapiv1.Machine:
				v, from = o.Labels[convert.MachineAPIClusterLabel], "its "+convert.MachineAPIClusterLabel+" label"
			case *mapiv1.MachineSet:
				v, from = o.Labels[convert.MachineAPIClusterLabel], "its "+convert.MachineAPIClusterLabel+" label"
			case *clusterv1.Machine:
				v, from = o.Spec.ClusterName, "spec.clusterName"
			case *clusterv1.MachineSet:
				v, from = o.Spec.ClusterName, "spec.clusterName"
			case *clusterv1.MachineHealthCheck:
				v, from = o.Spec.ClusterName, "spec.clusterName"
			}
			if v != "" {
				c.ClusterName = v
				res.Notes = append(res.Notes, fmt.Sprintf("cluster name %q taken from %s %s (%s); give --cluster-name or --infrastructure to set it", v, kindOf(d.Object), name(d.Object), from))
				break
			}
		}
	}
	if c.ClusterName == "" && len(work) > 0 {
		return c, &InputError{Where: "input", Err: errors.New("cannot tell the cluster name: give --cluster-name, or --infrastructure with an Infrastructure object")}
	}

	// Platform.
	platform, where, err := detectPlatform(work, infra)
	if err != nil {
		return c, err
	}
	if platform == "" {
		return c, nil
	}
	region, from := opts.Region, "--region"
	switch {
	case region != "":
	case platform == "aws" && infraObj != nil && infraObj.Status.PlatformStatus != nil && infraObj.Status.PlatformStatus.AWS != nil:
		region, from = infraObj.Status.PlatformStatus.AWS.Region, "the Infrastructure object"
	case platform == "aws" && awsCluster != nil:
		region, from = awsCluster.Spec.Region, "the AWSCluster"
	case platform == "sim" && simCluster != nil:
		region, from = simCluster.Spec.Region, "the SimCluster"
	}
	if region == "" {
		for _, d := range work {
			if r := providerSpecRegion(d.Object); r != "" {
				region = r
				res.Notes = append(res.Notes, fmt.Sprintf("cluster region %q taken from %s %s (%s); give --region or --infrastructure to set it", r, kindOf(d.Object), name(d.Object), d.Where))
				break
			}
		}
	}
	if region == "" {
		return c, &InputError{Where: where, Err: fmt.Errorf("cannot tell the cluster's %s region: give --region, or --infrastructure with an Infrastructure, AWSCluster or SimCluster", platform)}
	}
	if platform == "aws" && awsCluster != nil && awsCluster.Spec.Region != "" && awsCluster.Spec.Region != region {
		return c, &InputError{Where: "context", Err: fmt.Errorf("the AWSCluster's region %s differs from the region %s from %s", awsCluster.Spec.Region, region, from)}
	}
	switch platform {
	case "aws":
		p, err := aws.New(region)
		if err != nil {
			return c, &InputError{Where: "context", Err: err}
		}
		c.Platform = p
	case "sim":
		p, err := sim.New(region)
		if err != nil {
			return c, &InputError{Where: "context", Err: err}
		}
		c.Platform = p
	}
	return c, nil
}

type typeMeta struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Region     string          `json:"region"`
	Placement  json.RawMessage `json:"placement"`
	AMI        json.RawMessage `json:"ami"`
}

func providerSpecOf(o client.Object) *runtime.RawExtension {
	switch o := o.(type) {
	case *mapiv1.Machine:
		return o.Spec.ProviderSpec.Value
	case *mapiv1.MachineSet:
		return o.Spec.Template.Spec.ProviderSpec.Value
	}
	return nil
}

func peek(v *runtime.RawExtension) typeMeta {
	var t typeMeta
	if v != nil && v.Raw != nil {
		_ = json.Unmarshal(v.Raw, &t)
	}
	return t
}

func providerSpecRegion(o client.Object) string {
	t := peek(providerSpecOf(o))
	if t.Region != "" {
		return t.Region
	}
	var pl struct {
		Region string `json:"region"`
	}
	if len(t.Placement) > 0 {
		_ = json.Unmarshal(t.Placement, &pl)
	}
	return pl.Region
}

// detectPlatform names the one platform the input's machines are on ("" if none).
func detectPlatform(work, infra []Document) (string, string, error) {
	found, where := "", ""
	add := func(p, w string) error {
		if p == "" {
			return nil
		}
		if found != "" && found != p {
			return &InputError{Where: w, Err: fmt.Errorf("mixes platforms (%s in %s, %s here); convert one platform at a time", found, where, p)}
		}
		if found == "" {
			found, where = p, w
		}
		return nil
	}
	for _, d := range work {
		var p string
		switch o := d.Object.(type) {
		case *mapiv1.Machine, *mapiv1.MachineSet:
			t := peek(providerSpecOf(o))
			switch {
			case t.Kind == aws.ProviderSpecKind, t.Kind == "" && (len(t.Placement) > 0 || len(t.AMI) > 0):
				p = "aws"
			case t.Kind == sim.ProviderSpecKind, t.Kind == "" && t.Region != "":
				p = "sim"
			case providerSpecOf(o) == nil:
			default:
				return "", "", &InputError{Where: d.Where, Err: fmt.Errorf("%s %s: unknown providerSpec kind %q; machina converts %s and %s", kindOf(o), name(o), t.Kind, aws.ProviderSpecKind, sim.ProviderSpecKind)}
			}
		case *clusterv1.Machine:
			p = platformOfGroup(o.Spec.InfrastructureRef.APIGroup)
		case *clusterv1.MachineSet:
			p = platformOfGroup(o.Spec.Template.Spec.InfrastructureRef.APIGroup)
		}
		if err := add(p, d.Where); err != nil {
			return "", "", err
		}
	}
	for _, d := range infra {
		if err := add(platformOfGroup(d.Object.GetObjectKind().GroupVersionKind().Group), d.Where); err != nil {
			return "", "", err
		}
	}
	return found, where, nil
}

func platformOfGroup(g string) string {
	switch {
	case g == capav1.GroupVersion.Group:
		return "aws"
	case g == simv1.GroupVersion.Group:
		return "sim"
	case strings.TrimSpace(g) == "":
		return ""
	}
	return ""
}
