package patch

import (
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A pass that reads an object from the manager's cache before the cache has seen the
// manager's own last write of it (another event brought the pass first) computes the same
// change again and sends it locked to the version that write replaced: the API server can
// only answer with a conflict (measured: half a Machine status PATCH per Machine in bench
// migrate, each a 409). A client made by WithWriteRecord remembers, per object, the
// resourceVersion its last locked patch replaced, and a patch locked to that version is not
// sent: it fails at once with the conflict it would have met, which every caller already
// handles (the pass runs again on the newer copy). Nothing depends on the record: it is only
// a request saved, and a process that restarts has none. The manager's client has one
// (manager.New); any other client simply sends every patch.

// supersededFor is how long a replaced version is remembered. A cache that has not caught up
// with a write after this is not waited for here (and a version that comes back, as after a
// restore of etcd, is not refused for longer than this).
const supersededFor = 10 * time.Second

// supersededMax bounds the record: past it, entries older than supersededFor are dropped.
const supersededMax = 20000

// WithWriteRecord returns c with a record of the versions its locked patches replaced (see
// above). Build it once per API server, where the client is made.
func WithWriteRecord(c client.Client) client.Client {
	return &recordingClient{Client: c, rec: &writeRecord{versions: map[objectKey]replacedVersion{}, clock: time.Now}}
}

// NewClientWithWriteRecord is a controller-runtime NewClientFunc: client.New with a write record.
func NewClientWithWriteRecord(cfg *rest.Config, o client.Options) (client.Client, error) {
	c, err := client.New(cfg, o)
	if err != nil {
		return nil, err
	}
	return WithWriteRecord(c), nil
}

type recordingClient struct {
	client.Client
	rec *writeRecord
}

type writeRecord struct {
	mu       sync.Mutex
	versions map[objectKey]replacedVersion
	clock    func() time.Time
}

type objectKey struct {
	kind    string
	ns, obj string
}

type replacedVersion struct {
	rv string
	at time.Time
}

// recordOf returns c's write record and obj's key in it; ok is false for a client without one.
func recordOf(c client.Client, obj client.Object) (*writeRecord, objectKey, bool) {
	rc, ok := c.(*recordingClient)
	if !ok {
		return nil, objectKey{}, false
	}
	kind := fmt.Sprintf("%T", obj)
	switch obj.(type) {
	case *unstructured.Unstructured, *metav1.PartialObjectMetadata:
		// One Go type for every kind: the kind is in the object (a typed object's TypeMeta
		// is filled in by some reads and not others, so it is left out there).
		kind += " " + obj.GetObjectKind().GroupVersionKind().String()
	}
	return rc.rec, objectKey{kind: kind, ns: obj.GetNamespace(), obj: obj.GetName()}, true
}

// replaced records that a write of the object k moved it from version from to version to.
func (r *writeRecord) replaced(k objectKey, from, to string) {
	if from == "" || from == to {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock()
	if len(r.versions) >= supersededMax {
		for key, v := range r.versions {
			if now.Sub(v.at) > supersededFor {
				delete(r.versions, key)
			}
		}
	}
	r.versions[k] = replacedVersion{rv: from, at: now}
}

// errSuperseded is the conflict a patch locked to a version this process has already replaced
// would meet.
var errSuperseded = errors.New("the copy is older than this process's last write of the object")

// outdated returns a conflict error when rv is a version of the object k that a write through
// this client replaced less than supersededFor ago.
func (r *writeRecord) outdated(k objectKey, rv string) error {
	r.mu.Lock()
	v, found := r.versions[k]
	now := r.clock()
	r.mu.Unlock()
	if !found || v.rv != rv || now.Sub(v.at) > supersededFor {
		return nil
	}
	return apierrors.NewConflict(schema.GroupResource{Resource: k.kind}, k.obj, errSuperseded)
}
