package synccommon

import (
	"errors"
	"fmt"
	"reflect"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/gate"
)

// NotMirror reports a Cluster API Machine or MachineSet (nil, or a nil pointer, when there is
// none) that the sync must not take over for a Machine API copy the Machine API owns: it is
// active (no paused annotation) and it is not the sync's (no sync finalizer). Someone made
// it and runs it on their own; overwriting and pausing it would stop their Machine.
//
// Every copy of the sync's own carries the sync finalizer from its first moment: the sync
// creates a mirror with the finalizer and the paused annotation in the create request itself
// (a copy born Cluster API-authoritative with the finalizer), so no crash leaves a copy of
// its own without both marks. A Cluster API copy that became authoritative keeps the
// finalizer (the sync stores it on an authoritative Cluster API copy), so handing a resource
// back to the Machine API finds its own mirror. A copy the user paused is given up to the
// sync, as before.
func NotMirror(capi client.Object) bool {
	if capi == nil || isNilObject(capi) {
		return false
	}
	return !gate.HasPausedAnnotation(capi) && !controllerutil.ContainsFinalizer(capi, authority.SyncFinalizer)
}

// notMirrorError says which resource is in the way and how to clear the way.
func notMirrorError(kind string, capi client.Object) error {
	msg := fmt.Sprintf("Cluster API %[1]s %[2]s/%[3]s is active (no %[4]s annotation) and was not made by the sync (no %[5]s finalizer), "+
		"so the sync neither overwrites nor pauses it and mirrors nothing into it: rename the Machine API %[1]s %[3]s, or delete one of the two "+
		"(pausing the Cluster API %[1]s instead hands it to the sync, which then overwrites it as the mirror)",
		kind, capi.GetNamespace(), capi.GetName(), clusterv1.PausedAnnotation, authority.SyncFinalizer)
	if !capi.GetDeletionTimestamp().IsZero() {
		msg += "; it is being deleted, and the sync goes on once it is gone"
	}
	return errors.New(msg)
}

func isNilObject(o client.Object) bool {
	v := reflect.ValueOf(o)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
