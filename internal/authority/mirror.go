package authority

import "sigs.k8s.io/controller-runtime/pkg/client"

// MachinaDomain is the prefix of machina's own annotation keys. The sync never copies a key
// of it between the APIs: such keys describe the object they are on (the sync's records, the
// MachineHealthCheck authority annotations), not the resource both copies stand for.
const MachinaDomain = "machina.dev/"

// MirrorOfAnnotation marks an InfraMachine or InfraMachineTemplate the sync writes for a
// Machine API resource, naming it ("Machine/<name>", "MachineSet/<name>"). These objects carry
// no sync finalizer (their owner carries a deletion over); while paused, the mark is how the
// admission policies tell them from objects a user paused (config/admission).
const MirrorOfAnnotation = "machina.dev/mirror-of"

// MarkMirrorOf sets MirrorOfAnnotation on o to value, reporting a change.
func MarkMirrorOf(o client.Object, value string) bool {
	a := o.GetAnnotations()
	if v, ok := a[MirrorOfAnnotation]; ok && v == value {
		return false
	}
	if a == nil {
		a = map[string]string{}
	}
	a[MirrorOfAnnotation] = value
	o.SetAnnotations(a)
	return true
}

// MergeMap sets every key of from in into (creating it if needed). Keys only in into stay:
// other controllers may own them.
func MergeMap(into, from map[string]string) map[string]string {
	if len(from) == 0 {
		return into
	}
	if into == nil {
		into = map[string]string{}
	}
	for k, v := range from {
		into[k] = v
	}
	return into
}
