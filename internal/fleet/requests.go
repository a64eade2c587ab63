package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
)

// request asks for each item's move, all at once (items never exceed the free places), and
// puts those asked in flight; a request the API server refuses is a failure.
func (r *runner) request(ctx context.Context, items []Item) {
	errs := make([]error, len(items))
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Go(func() { errs[i] = Request(ctx, r.c, r.o.Namespace, it, r.o.To) })
	}
	wg.Wait()
	for i, it := range items {
		if errs[i] != nil {
			r.fail(it, "request refused: "+errs[i].Error())
			continue
		}
		res := r.set(it, Requested, "")
		res.Start = now()
		r.flying[it] = &flight{item: it, start: time.Now(), state: "requested"}
		r.emit(Event{Type: ItemRequested, Item: it})
	}
}

// Request sets the resource's requested authority with a merge patch: the field alone, so it
// cannot conflict with what controllers and people change meanwhile.
func Request(ctx context.Context, c client.Client, ns string, it Item, to machinev1beta1.MachineAuthority) error {
	obj, err := newObject(c, it.Kind)
	if err != nil {
		return err
	}
	obj.SetNamespace(ns)
	obj.SetName(it.Name)
	var patch map[string]any
	if it.Kind == MachineHealthCheck {
		patch = map[string]any{"metadata": map[string]any{"annotations": map[string]string{authority.MHCAuthoritativeAPIAnnotation: string(to)}}}
	} else {
		patch = map[string]any{"spec": map[string]any{"authoritativeAPI": to}}
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, data))
}

// listAbove is how many resources in flight make a poll list their kind rather than read
// each: a list of the namespace costs the API server about as much as this many reads.
const listAbove = 20

// poll reads every resource in flight and moves on those that finished, failed, went away or
// ran out of time.
func (r *runner) poll(ctx context.Context) {
	flights := make([]*flight, 0, len(r.flying))
	for _, f := range r.flying {
		flights = append(flights, f)
	}
	var objs []client.Object
	var errs []error
	if len(flights) > listAbove {
		objs, errs = r.list(ctx, flights)
	} else {
		objs, errs = r.get(ctx, flights)
	}
	for i, f := range flights {
		if ctx.Err() != nil {
			return
		}
		r.observe(f, objs[i], errs[i])
	}
}

// get reads each resource in flight, all at once.
func (r *runner) get(ctx context.Context, flights []*flight) ([]client.Object, []error) {
	objs := make([]client.Object, len(flights))
	errs := make([]error, len(flights))
	var wg sync.WaitGroup
	for i, f := range flights {
		wg.Go(func() { objs[i], errs[i] = read(ctx, r.c, r.o.Namespace, f.item) })
	}
	wg.Wait()
	return objs, errs
}

// list reads the resources in flight with one list of their kind (a wave holds one kind).
func (r *runner) list(ctx context.Context, flights []*flight) ([]client.Object, []error) {
	objs := make([]client.Object, len(flights))
	errs := make([]error, len(flights))
	found, err := List(ctx, r.c, r.o.Namespace, flights[0].item.Kind)
	for i, f := range flights {
		switch o, ok := found[f.item.Name]; {
		case err != nil:
			errs[i] = err
		case !ok:
			errs[i] = apierrors.NewNotFound(schema.GroupResource{Group: machinev1beta1.GroupName, Resource: strings.ToLower(f.item.Kind) + "s"}, f.item.Name)
		default:
			objs[i] = o
		}
	}
	return objs, errs
}

// observe moves one resource in flight on from what was read of it.
func (r *runner) observe(f *flight, obj client.Object, err error) {
	switch {
	case apierrors.IsNotFound(err):
		delete(r.flying, f.item)
		r.set(f.item, Gone, "deleted before it finished (a scale-down or a person)").End = now()
		r.emit(Event{Type: ItemGone, Item: f.item})
		return
	case err != nil:
		f.state = "unreadable: " + err.Error()
	default:
		s := stateOf(obj, r.o.To)
		if s.done {
			delete(r.flying, f.item)
			r.set(f.item, Migrated, "").End = now()
			r.emit(Event{Type: ItemMigrated, Item: f.item, Took: time.Since(f.start)})
			return
		}
		if s.failure != "" {
			r.fail(f.item, "cannot migrate to "+string(r.o.To)+": "+s.failure)
			return
		}
		if s.state != f.state {
			f.state = s.state
			r.emit(Event{Type: ItemProgress, Item: f.item, State: s.state})
		}
	}
	if time.Since(f.start) > r.o.Timeout {
		r.fail(f.item, fmt.Sprintf("did not finish within %s (last seen: %s); see kubectl describe %s", r.o.Timeout, f.state, f.item))
	}
}

// authorities reads the current status authority of every resource of kind in ns.
func authorities(ctx context.Context, c client.Client, ns, kind string) (map[string]machinev1beta1.MachineAuthority, error) {
	objs, err := List(ctx, c, ns, kind)
	if err != nil {
		return nil, err
	}
	out := make(map[string]machinev1beta1.MachineAuthority, len(objs))
	for name, o := range objs {
		out[name] = statusOf(o)
	}
	return out, nil
}

// List returns the resources of kind in ns by name; opts narrow the list (a label selector).
// Every kind a fleet holds is machine.openshift.io/v1beta1, so the scheme makes its list.
func List(ctx context.Context, c client.Client, ns, kind string, opts ...client.ListOption) (map[string]client.Object, error) {
	o, err := c.Scheme().New(machinev1beta1.GroupVersion.WithKind(kind + "List"))
	if err != nil {
		return nil, fmt.Errorf("unknown kind %q: %w", kind, err)
	}
	l := o.(client.ObjectList)
	if err := c.List(ctx, l, append([]client.ListOption{client.InNamespace(ns)}, opts...)...); err != nil {
		return nil, fmt.Errorf("listing %ss: %w", kind, err)
	}
	items, err := meta.ExtractList(l)
	if err != nil {
		return nil, err
	}
	out := make(map[string]client.Object, len(items))
	for _, it := range items {
		obj := it.(client.Object)
		out[obj.GetName()] = obj
	}
	return out, nil
}

// Exists returns the error of reading it (nil when it exists).
func Exists(ctx context.Context, c client.Client, ns string, it Item) error {
	_, err := read(ctx, c, ns, it)
	return err
}

// read reads it from the API server.
func read(ctx context.Context, c client.Client, ns string, it Item) (client.Object, error) {
	obj, err := newObject(c, it.Kind)
	if err != nil {
		return nil, err
	}
	return obj, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: it.Name}, obj)
}

// newObject is an empty object of kind.
func newObject(c client.Client, kind string) (client.Object, error) {
	o, err := c.Scheme().New(machinev1beta1.GroupVersion.WithKind(kind))
	if err != nil {
		return nil, fmt.Errorf("unknown kind %q: %w", kind, err)
	}
	return o.(client.Object), nil
}
