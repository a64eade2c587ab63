package synccommon

import (
	"sort"
	"strings"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
)

// The sync's record, kept on each mirror, of the label and annotation keys it copied there
// from the authoritative copy: comma-separated, sorted, absent when there are none. A key on
// the record that the authoritative copy no longer has is removed from the mirror; a key not
// on the record was put there by someone else and is left alone. The record is written in the
// same request as the keys it lists, so a crash never separates them.
const (
	SyncedLabelsAnnotation      = "machina.dev/synced-labels"
	SyncedAnnotationsAnnotation = "machina.dev/synced-annotations"
)

// notMirrored reports the keys the sync never copies between the APIs: those in machina's own
// domain (its records here, the MachineHealthCheck authority and synchronisation annotations
// of the Machine API copy), which describe the object they are on, and the paused annotation,
// which the sync and migration controllers set on each side for themselves.
func notMirrored(k string) bool {
	return k == clusterv1.PausedAnnotation || strings.HasPrefix(k, authority.MachinaDomain)
}

// MirrorMetadata makes mirror carry the labels and annotations of the authoritative copy
// (already converted): every such key is set, keys the sync copied before and the
// authoritative copy no longer has are removed, and every other key of the mirror stays. The
// caller writes mirror when anything changed.
func MirrorMetadata(mirror client.Object, labels, annotations map[string]string) {
	labels, annotations = mirrored(labels), mirrored(annotations)
	current := mirror.GetAnnotations()
	prevLabels, prevAnnotations := keyList(current[SyncedLabelsAnnotation]), keyList(current[SyncedAnnotationsAnnotation])

	outLabels := replaceKeys(mirror.GetLabels(), labels, prevLabels)
	outAnnotations := replaceKeys(current, annotations, prevAnnotations)
	outAnnotations = setRecord(outAnnotations, SyncedLabelsAnnotation, labels)
	outAnnotations = setRecord(outAnnotations, SyncedAnnotationsAnnotation, annotations)
	mirror.SetLabels(outLabels)
	mirror.SetAnnotations(outAnnotations)
}

// MarkMirrored turns a freshly converted object, about to be created as a mirror, into one
// whose record lists the labels and annotations it got from the authoritative copy.
func MarkMirrored(o client.Object) {
	labels, annotations := o.GetLabels(), o.GetAnnotations()
	o.SetLabels(nil)
	o.SetAnnotations(nil)
	MirrorMetadata(o, labels, annotations)
}

// mirrored drops the keys that are never copied.
func mirrored(in map[string]string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		if !notMirrored(k) {
			out[k] = v
		}
	}
	return out
}

// replaceKeys returns current with the keys of prev that want lacks removed and want's keys
// set; nil when empty. current itself is not modified.
func replaceKeys(current, want map[string]string, prev []string) map[string]string {
	out := make(map[string]string, len(current)+len(want))
	for k, v := range current {
		out[k] = v
	}
	for _, k := range prev {
		if _, keep := want[k]; !keep && !notMirrored(k) {
			delete(out, k)
		}
	}
	for k, v := range want {
		out[k] = v
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// setRecord writes the sorted keys of m under the record annotation key, or removes it.
func setRecord(annotations map[string]string, key string, m map[string]string) map[string]string {
	if len(m) == 0 {
		delete(annotations, key)
		if len(annotations) == 0 {
			return nil
		}
		return annotations
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[key] = strings.Join(keys, ",")
	return annotations
}

// keyList parses a record; label and annotation keys cannot contain commas.
func keyList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
