package synccommon

import (
	"slices"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
)

// The cluster autoscaler's scale-down marks a Machine of the MachineSet it works with, then
// lowers that set's replicas, and the MachineSet deletes the marked Machine first. It works with
// one API's MachineSets whichever API is authoritative, so it may mark a mirror (admission lets
// its identity do so, and nothing else of the reserved annotations). The sync carries such a
// mark to the authoritative copy in that API's spelling, where the MachineSet that scales acts
// on it.

// CarriedMarkAnnotation on the authoritative copy of a Machine records that its delete-machine
// mark was carried there from the mirror: once the mirror's mark is gone the sync removes it
// again, and it is never copied back onto the mirror (where it would look like the sync's).
const CarriedMarkAnnotation = "machina.dev/carried-delete-machine"

// MachineAPIDeleteMarks are the keys that mark a Machine API Machine for deletion: the current
// one first, then the older spelling the Machine API still honours.
var MachineAPIDeleteMarks = []string{convert.MachineAPIDeleteMachineAnnotation, convert.MachineAPIDeleteMachineAnnotationDeprecated}

// ClusterAPIDeleteMarks is the key that marks a Cluster API Machine for deletion.
var ClusterAPIDeleteMarks = []string{clusterv1.DeleteMachineAnnotation}

// Marked reports whether annotations hold any of keys.
func Marked(annotations map[string]string, keys []string) bool {
	return slices.ContainsFunc(keys, func(k string) bool { _, ok := annotations[k]; return ok })
}

// OwnMark is the value of the first of keys on the mirror that the sync did not copy there
// (absent from its record, SyncedAnnotationsAnnotation): a mark put on the mirror itself.
func OwnMark(mirror client.Object, keys []string) (string, bool) {
	a := mirror.GetAnnotations()
	recorded := keyList(a[SyncedAnnotationsAnnotation])
	for _, k := range keys {
		if v, ok := a[k]; ok && !slices.Contains(recorded, k) {
			return v, true
		}
	}
	return "", false
}

// CarryMark brings the authoritative copy's delete mark in line with the mark put on its mirror
// (value, marked; OwnMark): it is set under keys[0], with CarriedMarkAnnotation, when the mirror
// is marked and the authoritative copy is not; a carried mark is removed once the mirror's is
// gone. A mark of the authoritative copy's own is never touched. It reports a change.
func CarryMark(authoritative client.Object, value string, marked bool, keys []string) bool {
	a := authoritative.GetAnnotations()
	_, carried := a[CarriedMarkAnnotation]
	switch {
	case marked && !Marked(a, keys):
		if a == nil {
			a = map[string]string{}
		}
		a[keys[0]] = value
		a[CarriedMarkAnnotation] = "true"
	case !marked && carried:
		delete(a, keys[0])
		delete(a, CarriedMarkAnnotation)
	default:
		return false
	}
	authoritative.SetAnnotations(a)
	return true
}

// DropCarried removes keys from the annotations about to be mirrored from authoritative when
// its mark was carried from the mirror: the mirror keeps the mark put on it, as it was.
func DropCarried(authoritative client.Object, mirrored map[string]string, keys []string) {
	if _, carried := authoritative.GetAnnotations()[CarriedMarkAnnotation]; !carried {
		return
	}
	for _, k := range keys {
		delete(mirrored, k)
	}
}
