package patch

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A pass that reads an object from the manager's cache before the cache has seen the
// manager's own last write of it (another event brought the pass first) computes the same
// change again and sends it locked to the version that write replaced: the API server can
// only answer with a conflict (measured: half a Machine status PATCH per Machine in bench
// migrate, each a 409). The patches remember, per object, the resourceVersion their last write
// replaced, and such a patch is not sent: it fails at once with the conflict it would have met,
// which every caller already handles (the pass runs again on the newer copy). Nothing depends
// on the record: it is only a request saved, and a process that restarts has none.

// supersededFor is how long a replaced version is remembered. A cache that has not caught up
// with a write after this is not waited for here (and a version that comes back, as after a
// restore of etcd, is not refused for longer than this).
const supersededFor = 10 * time.Second

// supersededMax bounds the record: past it, entries older than supersededFor are dropped.
const supersededMax = 20000

type supersededKey struct {
	// One record per client (tests run several managers, each with its API server). The
	// client itself, a pointer, is the key: an address alone could be reused by a later client.
	client  client.Client
	kind    string
	ns, obj string
}

type supersededVersion struct {
	rv string
	at time.Time
}

var (
	supersededMu sync.Mutex
	superseded   = map[supersededKey]supersededVersion{}
	clock        = time.Now
)

// keyOf names obj for the record; ok is false for a client that is not a pointer (nothing is
// remembered for it).
func keyOf(c client.Client, obj client.Object) (supersededKey, bool) {
	if reflect.ValueOf(c).Kind() != reflect.Pointer {
		return supersededKey{}, false // not comparable for certain: no key
	}
	kind := fmt.Sprintf("%T", obj)
	switch obj.(type) {
	case *unstructured.Unstructured, *metav1.PartialObjectMetadata:
		// One Go type for every kind: the kind is in the object (a typed object's TypeMeta
		// is filled in by some reads and not others, so it is left out there).
		kind += " " + obj.GetObjectKind().GroupVersionKind().String()
	}
	return supersededKey{client: c, kind: kind, ns: obj.GetNamespace(), obj: obj.GetName()}, true
}

// replaced records that a write of the object moved it from version from to version to.
func (k supersededKey) replaced(from, to string) {
	if from == "" || from == to {
		return
	}
	now := clock()
	supersededMu.Lock()
	defer supersededMu.Unlock()
	if len(superseded) >= supersededMax {
		for key, v := range superseded {
			if now.Sub(v.at) > supersededFor {
				delete(superseded, key)
			}
		}
	}
	superseded[k] = supersededVersion{rv: from, at: now}
}

// errSuperseded is the conflict a patch locked to a version this process has already replaced
// would meet.
var errSuperseded = errors.New("the copy is older than this process's last write of the object")

// outdated returns a conflict error when rv is a version of the object that a write of this
// process replaced less than supersededFor ago.
func (k supersededKey) outdated(rv string) error {
	supersededMu.Lock()
	v, found := superseded[k]
	supersededMu.Unlock()
	if !found || v.rv != rv || clock().Sub(v.at) > supersededFor {
		return nil
	}
	return apierrors.NewConflict(schema.GroupResource{Resource: k.kind}, k.obj, errSuperseded)
}
