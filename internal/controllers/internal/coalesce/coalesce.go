// Package coalesce is how the controllers that count many children (the MachineSets of both
// APIs, the Cluster API Cluster) take their children's progress: an update that changes only
// what the parent counts brings the parent back Delay later, and the workqueue folds every
// such request of that second into one pass. A pass lists all the children, so at thousands
// of Machines a pass per update was the largest part of the manager's CPU (profiled in
// capi-scale -n 3000). Whatever the parent acts on at once (a child created, deleted, adopted,
// released, relabelled) still brings it back at once. And however it comes back, a parent
// is paced by its size (Pacer): its passes come no closer than PerChild per child.
package coalesce

import (
	"maps"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Delay is how long a parent waits for more of its children's progress before a pass.
const Delay = time.Second

// StatusOnly says whether an update of a controlled child leaves what its controller acts on
// as it was: the same controller, labels, annotations and finalizers, and no deletion. Its
// spec and status may have moved; the controller then only recounts, which can wait Delay.
func StatusOnly(old, cur client.Object) bool {
	return SameController(old, cur) &&
		maps.Equal(old.GetLabels(), cur.GetLabels()) && maps.Equal(old.GetAnnotations(), cur.GetAnnotations()) &&
		slices.Equal(old.GetFinalizers(), cur.GetFinalizers())
}

// SameController says whether an update leaves the child controlled by the same controller
// and deleted by nobody: the part of StatusOnly every parent needs, for a parent that judges
// the rest of the change itself.
func SameController(old, cur client.Object) bool {
	ro, rn := metav1.GetControllerOf(old), metav1.GetControllerOf(cur)
	return ro != nil && rn != nil && ro.UID == rn.UID &&
		old.GetDeletionTimestamp().IsZero() && cur.GetDeletionTimestamp().IsZero()
}
