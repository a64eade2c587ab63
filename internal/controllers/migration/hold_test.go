package migration_test

import (
	"fmt"

	"github.com/machina-dev/machina/internal/testenv"
)

// hold is a testenv.Hold on updates, written positionally in the step tables.
type hold struct {
	what, group, resource, deny string
}

func (h hold) apply(e *testenv.Env) (lift func()) {
	e.T.Helper()
	return testenv.Hold{What: h.what, Group: h.group, Resource: h.resource, Deny: h.deny}.Apply(e)
}

// CEL helpers for hold expressions.

func celHasCondition(obj, typ, status string) string {
	return fmt.Sprintf("(%s.?status.?conditions.orValue([]).exists(c, c.type == %q && c.status == %q))", obj, typ, status)
}

func celHasFinalizer(obj, f string) string {
	return fmt.Sprintf("(%q in %s.metadata.?finalizers.orValue([]))", f, obj)
}

func celHasAnnotation(obj, a string) string {
	return fmt.Sprintf("(%q in %s.metadata.?annotations.orValue({}))", a, obj)
}

func celNamed(name string) string { return fmt.Sprintf("(object.metadata.name == %q)", name) }
