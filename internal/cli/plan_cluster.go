package cli

import (
	"context"
	"fmt"
	"strconv"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/provider"
)

// clusterPlanner checks live resources: conversion of the side that would hand over, plus
// the state the migration controller requires before it starts.
type clusterPlanner struct {
	c         client.Client
	ns        authority.Namespaces
	to        machinev1beta1.MachineAuthority
	providers *provider.Registry

	capiMachines map[string]*clusterv1.Machine
	mapiMachines map[string]bool            // names of the Machine API Machines
	contexts     map[string]convert.Context // by the kind it was asked for ("" for a MachineHealthCheck's)
}

// contextFor is the conversion context for kind (a providerSpec's or an infrastructure
// kind), read from the cluster once per kind: a fleet's thousand Machines share a handful.
func (p *clusterPlanner) contextFor(ctx context.Context, kind string) (convert.Context, error) {
	if c, ok := p.contexts[kind]; ok {
		return c, nil
	}
	var c convert.Context
	var err error
	if kind == "" {
		c, err = authority.ClusterContext(ctx, p.c, p.ns)
	} else {
		c, err = authority.ContextFor(ctx, p.c, p.providers, p.ns, kind)
	}
	if err == nil {
		p.contexts[kind] = c
	}
	return c, err
}

// clusterClient is a client for the cluster cfg names whose scheme knows every registered
// platform's infrastructure kinds (the fixed scheme knows only the simulated cloud's and AWS's).
// It can watch: migrate follows the resources in flight (fleet).
func clusterClient(cfg *rest.Config) (client.Client, error) {
	s, err := provider.Builtin().Scheme()
	if err != nil {
		return nil, err
	}
	return client.NewWithWatch(cfg, client.Options{Scheme: s})
}

func planCluster(ctx context.Context, f *planFlags, to machinev1beta1.MachineAuthority) ([]planItem, error) {
	cfg, err := restConfig(f.kubeconfig)
	if err != nil {
		return nil, &ExitError{Code: planExitBadInput, Err: err}
	}
	c, err := clusterClient(cfg)
	if err != nil {
		return nil, &ExitError{Code: planExitBadInput, Err: err}
	}
	return planWith(ctx, c, authority.Namespaces{MachineAPI: f.mapiNS, ClusterAPI: f.capiNS}, to)
}

// planWith checks every Machine API resource in ns.MachineAPI through c.
func planWith(ctx context.Context, c client.Client, ns authority.Namespaces, to machinev1beta1.MachineAuthority) ([]planItem, error) {
	p := &clusterPlanner{c: c, ns: ns, to: to,
		providers:    provider.Builtin(),
		capiMachines: map[string]*clusterv1.Machine{}, mapiMachines: map[string]bool{}, contexts: map[string]convert.Context{}}
	var sets machinev1beta1.MachineSetList
	var machines machinev1beta1.MachineList
	var mhcs machinev1beta1.MachineHealthCheckList
	var capiMachines clusterv1.MachineList
	for _, l := range []struct {
		list client.ObjectList
		ns   string
	}{{&sets, ns.MachineAPI}, {&machines, ns.MachineAPI}, {&mhcs, ns.MachineAPI}, {&capiMachines, ns.ClusterAPI}} {
		if err := c.List(ctx, l.list, client.InNamespace(l.ns)); err != nil {
			return nil, &ExitError{Code: planExitBadInput, Err: fmt.Errorf("reading the cluster: %w", err)}
		}
	}
	for i := range capiMachines.Items {
		p.capiMachines[capiMachines.Items[i].Name] = &capiMachines.Items[i]
	}
	for i := range machines.Items {
		p.mapiMachines[machines.Items[i].Name] = true
	}
	var items []planItem
	for i := range sets.Items {
		items = append(items, p.machineSet(ctx, &sets.Items[i], machines.Items))
	}
	for i := range machines.Items {
		items = append(items, p.machine(ctx, &machines.Items[i]))
	}
	for i := range mhcs.Items {
		items = append(items, p.mhc(ctx, &mhcs.Items[i]))
	}
	return items, nil
}

// start fills in the authority and reports whether there is anything left to check.
func (p *clusterPlanner) start(it *planItem, spec, status machinev1beta1.MachineAuthority) bool {
	it.authority = string(status)
	if it.authority == "" {
		it.authority = "(not set yet)"
	}
	if status == p.to {
		it.done = true
		return false
	}
	switch {
	case status == machinev1beta1.MachineAuthorityMigrating:
		it.notes = append(it.notes, "a migration is in progress")
	case spec == p.to:
		it.notes = append(it.notes, "a migration to "+string(p.to)+" has been requested")
	}
	return true
}

func (p *clusterPlanner) machine(ctx context.Context, m *machinev1beta1.Machine) planItem {
	it := planItem{kind: "Machine", name: m.Name}
	if !p.start(&it, m.Spec.AuthoritativeAPI, m.Status.AuthoritativeAPI) {
		return it
	}
	capi := p.capiMachines[m.Name]
	var errs field.ErrorList
	var err error
	if p.to == machinev1beta1.MachineAuthorityClusterAPI {
		errs, err = p.convertMachineToCAPI(ctx, m)
	} else {
		errs, err = p.convertMachineToMAPI(ctx, capi)
	}
	p.addConversion(&it, errs, err)
	p.addSync(&it, m.Status.Conditions, m.Status.AuthoritativeAPI, m.Generation, capiGeneration(capi), m.Status.SynchronizedGeneration)
	return it
}

func (p *clusterPlanner) machineSet(ctx context.Context, ms *machinev1beta1.MachineSet, machines []machinev1beta1.Machine) planItem {
	it := planItem{kind: "MachineSet", name: ms.Name}
	if !p.start(&it, ms.Spec.AuthoritativeAPI, ms.Status.AuthoritativeAPI) {
		return it
	}
	capi := &clusterv1.MachineSet{}
	if err := p.c.Get(ctx, client.ObjectKey{Namespace: p.ns.ClusterAPI, Name: ms.Name}, capi); err != nil {
		if !apierrors.IsNotFound(err) {
			it.blockers = append(it.blockers, "reading the Cluster API copy: "+err.Error())
		}
		capi = nil
	}
	var errs field.ErrorList
	var err error
	switch {
	case p.to == machinev1beta1.MachineAuthorityClusterAPI:
		cctx, cerr := p.contextFor(ctx, authority.ProviderSpecKind(ms.Spec.Template.Spec.ProviderSpec))
		if err = cerr; err == nil {
			_, _, errs = convert.ToClusterAPIMachineSet(ms, cctx)
		}
	case capi == nil:
		err = fmt.Errorf("no Cluster API copy %s/%s to convert back", p.ns.ClusterAPI, ms.Name)
	default:
		ref := capi.Spec.Template.Spec.InfrastructureRef
		var tmpl client.Object
		if tmpl, err = p.infra(ctx, ref.APIGroup, ref.Kind, ref.Name); err == nil {
			var cctx convert.Context
			if cctx, err = p.contextFor(ctx, ref.Kind); err == nil {
				_, _, errs = convert.ToMachineAPIMachineSet(capi, tmpl, cctx)
			}
		}
	}
	p.addConversion(&it, errs, err)
	var capiGen int64
	if capi != nil {
		capiGen = capi.Generation
	}
	p.addSync(&it, ms.Status.Conditions, ms.Status.AuthoritativeAPI, ms.Generation, capiGen, ms.Status.SynchronizedGeneration)
	// The handover also waits until every Machine of the set is mirrored in both APIs.
	for i := range machines {
		m := &machines[i]
		if ownerOf(m.OwnerReferences, "MachineSet") == ms.Name && p.capiMachines[m.Name] == nil {
			it.blockers = append(it.blockers, fmt.Sprintf("Machine %s has no Cluster API copy yet", m.Name))
		}
	}
	if capi != nil {
		for _, cm := range p.capiMachines {
			if ownerOf(cm.OwnerReferences, "MachineSet") == ms.Name && !p.mapiMachines[cm.Name] {
				it.blockers = append(it.blockers, fmt.Sprintf("Cluster API Machine %s has no Machine API copy yet", cm.Name))
			}
		}
	}
	return it
}

func (p *clusterPlanner) mhc(ctx context.Context, h *machinev1beta1.MachineHealthCheck) planItem {
	it := planItem{kind: "MachineHealthCheck", name: h.Name}
	// The check's authority lives in annotations (see internal/gate); unset means MachineAPI.
	status := machinev1beta1.MachineAuthority(h.Annotations[authority.MHCStatusAuthoritativeAPIAnnotation])
	if status == "" {
		status = machinev1beta1.MachineAuthorityMachineAPI
	}
	spec := machinev1beta1.MachineAuthority(h.Annotations[authority.MHCAuthoritativeAPIAnnotation])
	if !p.start(&it, spec, status) {
		return it
	}
	capi := &clusterv1.MachineHealthCheck{}
	if err := p.c.Get(ctx, client.ObjectKey{Namespace: p.ns.ClusterAPI, Name: h.Name}, capi); err != nil {
		if !apierrors.IsNotFound(err) {
			it.blockers = append(it.blockers, "reading the Cluster API copy: "+err.Error())
		}
		capi = nil
	}
	cctx, err := p.contextFor(ctx, "")
	var errs field.ErrorList
	switch {
	case err != nil:
	case p.to == machinev1beta1.MachineAuthorityClusterAPI:
		_, _, errs = convert.ToClusterAPIMachineHealthCheck(h, cctx)
	case capi == nil:
		err = fmt.Errorf("no Cluster API copy %s/%s to convert back", p.ns.ClusterAPI, h.Name)
	default:
		_, _, errs = convert.ToMachineAPIMachineHealthCheck(capi, cctx)
	}
	p.addConversion(&it, errs, err)
	var capiGen int64
	if capi != nil {
		capiGen = capi.Generation
	}
	synced, _ := strconv.ParseInt(h.Annotations[authority.MHCSynchronizedGenerationAnnotation], 10, 64)
	p.addSync(&it, h.Status.Conditions, status, h.Generation, capiGen, synced)
	return it
}

func (p *clusterPlanner) convertMachineToCAPI(ctx context.Context, m *machinev1beta1.Machine) (field.ErrorList, error) {
	cctx, err := p.contextFor(ctx, authority.ProviderSpecKind(m.Spec.ProviderSpec))
	if err != nil {
		return nil, err
	}
	_, _, errs := convert.ToClusterAPIMachine(m, cctx)
	return errs, nil
}

func (p *clusterPlanner) convertMachineToMAPI(ctx context.Context, capi *clusterv1.Machine) (field.ErrorList, error) {
	if capi == nil {
		return nil, fmt.Errorf("no Cluster API copy in %s to convert back", p.ns.ClusterAPI)
	}
	ref := capi.Spec.InfrastructureRef
	infra, err := p.infra(ctx, ref.APIGroup, ref.Kind, ref.Name)
	if err != nil {
		return nil, err
	}
	cctx, err := p.contextFor(ctx, ref.Kind)
	if err != nil {
		return nil, err
	}
	_, _, errs := convert.ToMachineAPIMachine(capi, infra, cctx)
	return errs, nil
}

// infra reads an InfraMachine or InfraMachineTemplate of a kind machina's scheme knows.
func (p *clusterPlanner) infra(ctx context.Context, group, kind, name string) (client.Object, error) {
	prov, err := p.providers.ForInfraKind(schema.GroupKind{Group: group, Kind: kind})
	if err != nil {
		return nil, err
	}
	for _, gvk := range prov.InfraKinds() {
		if gvk.Kind != kind {
			continue
		}
		o, err := p.c.Scheme().New(gvk)
		if err != nil {
			return nil, err
		}
		obj := o.(client.Object)
		if err := p.c.Get(ctx, client.ObjectKey{Namespace: p.ns.ClusterAPI, Name: name}, obj); err != nil {
			return nil, fmt.Errorf("reading %s %s/%s: %w", kind, p.ns.ClusterAPI, name, err)
		}
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		return obj, nil
	}
	return nil, fmt.Errorf("%s: no conversion for infrastructure kind %s", schema.GroupKind{Group: group, Kind: kind}, kind)
}

func (p *clusterPlanner) addConversion(it *planItem, errs field.ErrorList, err error) {
	if err != nil {
		it.blockers = append(it.blockers, "cannot convert: "+err.Error())
	}
	for _, e := range errs {
		it.blockers = append(it.blockers, e.Error())
	}
}

// addSync adds the synchronisation state the migration controller requires: Synchronized
// True, and a mirror that has caught up with the current authority's generation.
func (p *clusterPlanner) addSync(it *planItem, conds []machinev1beta1.Condition, status machinev1beta1.MachineAuthority, mapiGen, capiGen, synced int64) {
	if b := conditionBlocker(conds, authority.SynchronizedCondition); b != "" {
		// A failed conversion is already listed field by field.
		if c := mapicond.Get(conds, authority.SynchronizedCondition); c == nil || c.Reason != authority.ConversionFailedReason || len(it.blockers) == 0 {
			it.blockers = append(it.blockers, b)
		}
		return
	}
	want, side := mapiGen, "Machine API"
	if status == machinev1beta1.MachineAuthorityClusterAPI {
		want, side = capiGen, "Cluster API"
	}
	if status != machinev1beta1.MachineAuthorityMigrating && want != 0 && synced != want {
		it.blockers = append(it.blockers, fmt.Sprintf("the mirror is behind: synchronised generation %d, the %s copy is at generation %d", synced, side, want))
	}
}

func capiGeneration(m *clusterv1.Machine) int64 {
	if m == nil {
		return 0
	}
	return m.Generation
}
