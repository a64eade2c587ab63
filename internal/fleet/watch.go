package fleet

import (
	"context"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// follow watches the resources of kind in ns from now on and hands over each version the
// API server sends, so a run sees a handover finish the moment its status says so rather
// than at its next read (a poll every 500 ms made each of ten handovers in flight wait a
// quarter of a second on average before the next was asked for). The reads go on beside it,
// at the same pace: they find what a watch can miss (the watch ending, an event dropped)
// and the resources that time out. Nil when c cannot watch or the watch cannot start; the
// channel closes when the watch ends or ctx is done.
func follow(ctx context.Context, c client.Client, ns, kind string) <-chan client.Object {
	wc, ok := c.(client.WithWatch)
	if !ok {
		return nil
	}
	newList := func() (client.ObjectList, bool) {
		o, err := c.Scheme().New(machinev1beta1.GroupVersion.WithKind(kind + "List"))
		if err != nil {
			return nil, false
		}
		l, ok := o.(client.ObjectList)
		return l, ok
	}
	now, ok := newList()
	if !ok || c.List(ctx, now, client.InNamespace(ns), client.Limit(1)) != nil {
		return nil
	}
	l, _ := newList()
	w, err := wc.Watch(ctx, l, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: now.GetResourceVersion()}})
	if err != nil {
		return nil
	}
	out := make(chan client.Object, 64)
	go func() {
		defer close(out)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				o, isObj := ev.Object.(client.Object)
				if !isObj || (ev.Type != watch.Added && ev.Type != watch.Modified) {
					continue
				}
				select {
				case out <- o:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}
