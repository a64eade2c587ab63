// Package ownedby indexes objects in the manager's cache by the UID of their controller, so a
// controller of a few objects among thousands in one namespace (a MachineSet of 50 among 3000
// Machines) lists its own without walking and copying every object of the namespace on each
// pass. Listing a namespace per pass, with a pass per Machine change, grows with the square of
// the fleet (measured: bench migrate -n 3000).
package ownedby

import (
	"context"
	"reflect"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// field is the index's name.
const field = "machina.dev/controller-uid"

type key struct {
	indexer client.FieldIndexer
	kind    reflect.Type
}

// registered remembers which (indexer, type) pairs have the index: several controllers index
// the same type, and an informer refuses a second index of the same name.
var (
	mu         sync.Mutex
	registered = map[key]bool{}
)

// Index adds the controller-UID index for obj's type to indexer (a manager's field indexer).
// Adding it again for the same indexer and type does nothing.
func Index(ctx context.Context, indexer client.FieldIndexer, obj client.Object) error {
	mu.Lock()
	defer mu.Unlock()
	k := key{indexer, reflect.TypeOf(obj)}
	if registered[k] {
		return nil
	}
	if err := indexer.IndexField(ctx, obj, field, controllerUID); err != nil {
		return err
	}
	registered[k] = true
	return nil
}

// orphan is the index value of an object without a controller (no UID looks like it).
const orphan = "<none>"

func controllerUID(o client.Object) []string {
	if ref := metav1.GetControllerOfNoCopy(o); ref != nil {
		return []string{string(ref.UID)}
	}
	return []string{orphan}
}

// List lists into list the objects of namespace ns whose controller's UID is uid. The reader
// must serve the index (the manager's cached client, after Index). Further options (e.g.
// client.UnsafeDisableDeepCopy) are passed on.
func List(ctx context.Context, c client.Reader, list client.ObjectList, ns string, uid types.UID, opts ...client.ListOption) error {
	return listByValue(ctx, c, list, ns, string(uid), opts)
}

// ListOrphans lists into list the objects of namespace ns that have no controller, as List.
func ListOrphans(ctx context.Context, c client.Reader, list client.ObjectList, ns string, opts ...client.ListOption) error {
	return listByValue(ctx, c, list, ns, orphan, opts)
}

func listByValue(ctx context.Context, c client.Reader, list client.ObjectList, ns, value string, opts []client.ListOption) error {
	return c.List(ctx, list, append([]client.ListOption{client.InNamespace(ns), client.MatchingFields{field: value}}, opts...)...)
}
