// Package events gives machina's controllers an event recorder on the events.k8s.io API
// (controller-runtime's GetEventRecorder) behind the record.EventRecorder interface they
// call. Each event's action is its reason: machina's reasons already name what happened
// ("MirrorCreated", "Migrated"). Readers of core/v1 Events see the same type, reason, object
// and message as before.
package events

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	ctrlrecorder "sigs.k8s.io/controller-runtime/pkg/recorder"
)

// Provider is what hands out recorders: a controller-runtime manager or cluster.
type Provider interface {
	GetEventRecorder(name string) ctrlrecorder.EventRecorder
}

// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch;update

// Eventf records an event on obj through rec; it does nothing when rec is nil (a reconciler
// built without a recorder, as unit tests build them). Controllers call it instead of
// rec.Eventf so none needs its own nil guard.
func Eventf(rec record.EventRecorder, obj runtime.Object, eventtype, reason, format string, args ...any) {
	if rec != nil {
		rec.Eventf(obj, eventtype, reason, format, args...)
	}
}

// For returns a recorder reporting as controller name.
func For(p Provider, name string) record.EventRecorder { return recorder{p.GetEventRecorder(name)} }

type recorder struct{ r ctrlrecorder.EventRecorder }

func (a recorder) Event(obj runtime.Object, eventtype, reason, message string) {
	a.r.Eventf(obj, nil, eventtype, reason, reason, "%s", message)
}

func (a recorder) Eventf(obj runtime.Object, eventtype, reason, format string, args ...any) {
	a.r.Eventf(obj, nil, eventtype, reason, reason, format, args...)
}

func (a recorder) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventtype, reason, format string, args ...any) {
	a.r.AnnotatedEventf(obj, nil, annotations, eventtype, reason, reason, format, args...)
}
