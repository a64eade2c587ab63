package document

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	mapiv1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/provider"
)

// isClusterWide reports whether obj is a context object: the Infrastructure or one of the
// platforms' InfraClusters.
func isClusterWide(obj client.Object, reg *provider.Registry) bool {
	if _, ok := obj.(*configv1.Infrastructure); ok {
		return true
	}
	gk := obj.GetObjectKind().GroupVersionKind().GroupKind()
	for _, p := range reg.All() {
		if p.InfraCluster.GroupKind() == gk {
			return true
		}
	}
	return false
}

// buildContext works out the cluster name and platform from the options, the context
// objects and, failing those, the input itself (recording a note when it does).
func buildContext(work, infra, ctxDocs []Document, opts Options, reg *provider.Registry, res *Result) (convert.Context, error) {
	c := convert.Context{Namespaces: opts.Namespaces, AdditionalSyncMachineLabels: opts.AdditionalSyncMachineLabels}
	var infraObj *configv1.Infrastructure
	for _, d := range ctxDocs {
		if o, ok := d.Object.(*configv1.Infrastructure); ok {
			infraObj = o
		}
	}
	c.ClusterName = clusterName(work, infraObj, opts, res)
	if c.ClusterName == "" && len(work) > 0 {
		return c, &InputError{Where: "input", Err: errors.New("cannot tell the cluster name: give --cluster-name, or --infrastructure with an Infrastructure object")}
	}
	named := infraPlatform(infraObj, reg)
	p, where, err := detectPlatform(work, infra, reg, named)
	if err != nil || p == nil {
		return c, err
	}
	if named != nil && named.Name != p.Name {
		return c, &InputError{Where: where, Err: fmt.Errorf("the input is on %s, but the Infrastructure object says the cluster runs on %s", p.Name, named.Name)}
	}
	region := ""
	if !p.Regionless {
		if region, err = clusterRegion(*p, where, work, ctxDocs, infraObj, opts, reg, res); err != nil {
			return c, err
		}
	}
	if p.NewPlatform == nil {
		return c, &InputError{Where: where, Err: fmt.Errorf("the %s platform has no offline conversion", p.Name)}
	}
	if c.Platform, err = p.NewPlatform(region); err != nil {
		return c, &InputError{Where: "context", Err: err}
	}
	if p.ApplyClusterObject != nil {
		for _, d := range ctxDocs {
			c.Platform = p.ApplyClusterObject(c.Platform, d.Object)
		}
	}
	return c, nil
}

// clusterName takes the cluster name from the options, the Infrastructure or, noting it,
// the first object of the input that names one ("" if none does).
func clusterName(work []Document, infraObj *configv1.Infrastructure, opts Options, res *Result) string {
	switch {
	case opts.ClusterName != "":
		return opts.ClusterName
	case infraObj != nil && infraObj.Status.InfrastructureName != "":
		return infraObj.Status.InfrastructureName
	}
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
			hint := "give --cluster-name or --infrastructure to set it"
			if infraObj != nil {
				hint = "the Infrastructure given has no status.infrastructureName; give --cluster-name to set it"
			}
			res.Notes = append(res.Notes, fmt.Sprintf("cluster name %q taken from %s %s (%s); %s", v, kindOf(d.Object), name(d.Object), from, hint))
			return v
		}
	}
	return ""
}

// clusterRegion takes the region of a cluster on platform p from, in order: the options,
// the Infrastructure, the platform's InfraCluster and, noting it, the first providerSpec of
// the input that names one. An InfraCluster naming another region is an error.
func clusterRegion(p provider.Provider, where string, work, ctxDocs []Document, infraObj *configv1.Infrastructure, opts Options, reg *provider.Registry, res *Result) (string, error) {
	var infraCluster client.Object
	for _, d := range ctxDocs {
		if d.Object.GetObjectKind().GroupVersionKind().GroupKind() == p.InfraCluster.GroupKind() {
			infraCluster = d.Object
		}
	}
	regionOf := func(obj client.Object) string {
		if obj == nil || p.RegionOf == nil {
			return ""
		}
		return p.RegionOf(obj)
	}
	region, from := opts.Region, "--region"
	if region == "" && infraObj != nil {
		region, from = regionOf(infraObj), "the Infrastructure object"
	}
	if region == "" {
		region, from = regionOf(infraCluster), "the "+p.InfraCluster.Kind
	}
	hint := "give --region or --infrastructure to set it"
	if infraObj != nil || infraCluster != nil {
		hint = "the cluster-wide objects given name no " + p.Name + " region; give --region to set it"
	}
	if region == "" {
		region = inputRegion(p, work, hint, res)
	}
	if region == "" {
		if infraObj != nil || infraCluster != nil {
			return "", &InputError{Where: where, Err: fmt.Errorf("cannot tell the cluster's %s region: %s", p.Name, hint)}
		}
		return "", &InputError{Where: where, Err: fmt.Errorf("cannot tell the cluster's %s region: give --region, or --infrastructure with %s", p.Name, oneOf(contextKinds(reg), "or"))}
	}
	if r := regionOf(infraCluster); r != "" && r != region {
		return "", &InputError{Where: "context", Err: fmt.Errorf("the %s's region %s differs from the region %s from %s", p.InfraCluster.Kind, r, region, from)}
	}
	return region, nil
}

// inputRegion returns the first region the input names: in a providerSpec, or by the zone of
// a Cluster API Machine or MachineSet when the platform can tell a zone's region. It notes
// where it was found, with hint on how to set it instead.
func inputRegion(p provider.Provider, work []Document, hint string, res *Result) string {
	for _, d := range work {
		r, from := "", d.Where
		switch o := d.Object.(type) {
		case *clusterv1.Machine:
			r, from = zoneRegion(p, o.Spec.FailureDomain), "spec.failureDomain "+o.Spec.FailureDomain
		case *clusterv1.MachineSet:
			r, from = zoneRegion(p, o.Spec.Template.Spec.FailureDomain), "spec.template.spec.failureDomain "+o.Spec.Template.Spec.FailureDomain
		default:
			if v := providerSpecOf(d.Object); v != nil && v.Raw != nil && p.SpecRegion != nil {
				r = p.SpecRegion(v.Raw)
			}
		}
		if r != "" {
			res.Notes = append(res.Notes, fmt.Sprintf("cluster region %q taken from %s %s (%s); %s", r, kindOf(d.Object), name(d.Object), from, hint))
			return r
		}
	}
	return ""
}

func zoneRegion(p provider.Provider, zone string) string {
	if zone == "" || p.ZoneRegion == nil {
		return ""
	}
	return p.ZoneRegion(zone)
}

// contextKinds names the kinds of context objects: "an Infrastructure" and the InfraClusters.
func contextKinds(reg *provider.Registry) []string {
	kinds := []string{"an Infrastructure"}
	for _, p := range byName(reg) {
		kinds = append(kinds, p.InfraCluster.Kind)
	}
	return kinds
}

// oneOf joins items as "a, b and c" (conj "and") or "a, b or c".
func oneOf(items []string, conj string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " " + conj + " " + items[len(items)-1]
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

// infraPlatform is the platform an Infrastructure object's platform status names, nil when
// there is no Infrastructure or no registered platform has its type.
func infraPlatform(infraObj *configv1.Infrastructure, reg *provider.Registry) *provider.Provider {
	if infraObj == nil {
		return nil
	}
	p, err := reg.ForInfrastructure(infraObj)
	if err != nil {
		return nil
	}
	return &p
}

// detectPlatform finds the one platform the input's machines are on (nil if none) and the
// document it was first seen in; named is the Infrastructure's platform, which decides for a
// providerSpec without a kind.
func detectPlatform(work, infra []Document, reg *provider.Registry, named *provider.Provider) (*provider.Provider, string, error) {
	var found *provider.Provider
	where := ""
	for _, d := range slices.Concat(work, infra) {
		p, err := platformOf(d.Object, reg, named)
		if err != nil {
			return nil, "", &InputError{Where: d.Where, Err: err}
		}
		switch {
		case p == nil:
		case found == nil:
			found, where = p, d.Where
		case found.Name != p.Name:
			return nil, "", &InputError{Where: d.Where, Err: fmt.Errorf("mixes platforms (%s in %s, %s here); convert one platform at a time", found.Name, where, p.Name)}
		}
	}
	return found, where, nil
}

// platformOf names the platform of one object of the input: from the providerSpec of a
// Machine API object, the infrastructureRef of a Cluster API one, or an infrastructure
// object's kind. It is nil when the object does not say.
func platformOf(obj client.Object, reg *provider.Registry, named *provider.Provider) (*provider.Provider, error) {
	var p provider.Provider
	var err error
	switch o := obj.(type) {
	case *mapiv1.Machine, *mapiv1.MachineSet:
		v := providerSpecOf(o)
		if v == nil {
			return nil, nil
		}
		if p, err = platformOfSpec(v, reg, named); err != nil {
			return nil, fmt.Errorf("%s %s: %w", kindOf(o), name(o), err)
		}
	case *clusterv1.Machine:
		return platformOfRef(o, o.Spec.InfrastructureRef, "spec.infrastructureRef", reg)
	case *clusterv1.MachineSet:
		return platformOfRef(o, o.Spec.Template.Spec.InfrastructureRef, "spec.template.spec.infrastructureRef", reg)
	case *clusterv1.MachineHealthCheck, *configv1.Infrastructure:
		return nil, nil
	default:
		if p, err = reg.ForInfraKind(obj.GetObjectKind().GroupVersionKind().GroupKind()); err != nil {
			return nil, nil // not a kind any platform decodes; Decode refuses those
		}
	}
	return &p, nil
}

// platformOfSpec finds the platform of a providerSpec value: by its kind or, when it has
// none, by the Infrastructure's platform (named, may be nil) or else the fields only one
// platform's providerSpec has.
func platformOfSpec(v *runtime.RawExtension, reg *provider.Registry, named *provider.Provider) (provider.Provider, error) {
	kind := provider.SpecKind(mapiv1.ProviderSpec{Value: v})
	if kind != "" {
		if p, err := reg.ForProviderSpecKind(kind); err == nil {
			return p, nil
		}
		return provider.Provider{}, unknownSpecKind(kind, reg)
	}
	if named != nil {
		return *named, nil
	}
	var matches []provider.Provider
	for _, p := range byName(reg) {
		if p.MatchesKindlessSpec != nil && v.Raw != nil && p.MatchesKindlessSpec(v.Raw) {
			matches = append(matches, p)
		}
	}
	switch len(matches) {
	case 0:
		return provider.Provider{}, unknownSpecKind(kind, reg)
	case 1:
		return matches[0], nil
	}
	names := make([]string, len(matches))
	for i, p := range matches {
		names[i] = p.Name
	}
	return provider.Provider{}, fmt.Errorf("the providerSpec value has no kind and could be on %s; set its kind", oneOf(names, "or"))
}

func unknownSpecKind(kind string, reg *provider.Registry) error {
	var kinds []string
	for _, p := range byName(reg) {
		kinds = append(kinds, p.ProviderSpecKinds...)
	}
	return fmt.Errorf("unknown providerSpec kind %q; machina converts %s", kind, oneOf(kinds, "and"))
}

// platformOfRef finds the platform of a Cluster API object's infrastructure reference at
// path; an unset reference says nothing.
func platformOfRef(o client.Object, ref clusterv1.ContractVersionedObjectReference, path string, reg *provider.Registry) (*provider.Provider, error) {
	if ref.Kind == "" {
		return nil, nil
	}
	p, err := reg.ForRef(ref)
	if err != nil {
		var kinds []string
		for _, p := range byName(reg) {
			kinds = append(kinds, p.InfraMachine.Kind, p.InfraMachineTemplate.Kind)
		}
		return nil, fmt.Errorf("%s %s: %s: %w; machina converts %s", kindOf(o), name(o), path, err, oneOf(kinds, "and"))
	}
	return &p, nil
}
