package migration

import (
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
)

type (
	metav1Condition = metav1.Condition
	eventRecorder   = record.EventRecorder
)

// isNil reports whether an interface holds a nil pointer.
func isNil(o any) bool {
	v := reflect.ValueOf(o)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
