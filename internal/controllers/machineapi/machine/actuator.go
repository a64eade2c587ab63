// Package machine is the Machine API Machine controller: it drives a machine.openshift.io
// Machine through Provisioning → Provisioned → Running and, on deletion, through its
// lifecycle hooks, the drain, the instance's deletion and the Node's, by calling an Actuator.
// The Machine whose Node runs the manager itself is not drained or deleted without an
// explicit override (protect.go). Any infrastructure provider plugs in by implementing
// Actuator.
package machine

import (
	"context"
	"errors"
	"fmt"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
)

// Actuator talks to one infrastructure provider. Every method must be idempotent and may
// be called again after a crash at any point. Methods may change the Machine they are given
// in memory (spec.providerID, status.addresses, status.providerStatus, annotations); the
// controller persists those changes.
//
// The controller calls Create only when Exists returned false, Update only when Exists
// returned true, and Delete only while the Machine is being deleted.
type Actuator interface {
	// Exists reports whether the Machine's instance exists (is not terminated).
	Exists(ctx context.Context, m *machinev1beta1.Machine) (bool, error)
	// Create creates the instance. It must use an idempotency token derived from the
	// Machine (its UID) so that no retry ever creates a second instance.
	Create(ctx context.Context, m *machinev1beta1.Machine) error
	// Update refreshes what the Machine reports about its instance.
	Update(ctx context.Context, m *machinev1beta1.Machine) error
	// Delete starts or continues the deletion of the instance.
	Delete(ctx context.Context, m *machinev1beta1.Machine) error
}

// RequeueAfterError asks the controller to try again later without failing the Machine,
// for example while the cloud is throttling or unavailable.
type RequeueAfterError struct {
	After  time.Duration
	Reason string // a CamelCase reason for the condition that reports it
	Err    error
}

func (e *RequeueAfterError) Error() string {
	return fmt.Sprintf("%s: %v (retrying in %s)", e.Reason, e.Err, e.After)
}
func (e *RequeueAfterError) Unwrap() error { return e.Err }

// RequeueAfter wraps err as a RequeueAfterError.
func RequeueAfter(after time.Duration, reason string, err error) error {
	return &RequeueAfterError{After: after, Reason: reason, Err: err}
}

// TerminalError means the Machine can never succeed as specified: the controller moves it
// to phase Failed with the given errorReason and the message (which names the field).
type TerminalError struct {
	Reason  machinev1beta1.MachineStatusError
	Message string
}

func (e *TerminalError) Error() string { return string(e.Reason) + ": " + e.Message }

// InvalidConfiguration returns a TerminalError with reason InvalidConfiguration.
func InvalidConfiguration(format string, args ...any) error {
	return &TerminalError{Reason: machinev1beta1.InvalidConfigurationMachineError, Message: fmt.Sprintf(format, args...)}
}

func asRequeue(err error) (*RequeueAfterError, bool) {
	var r *RequeueAfterError
	ok := errors.As(err, &r)
	return r, ok
}

func asTerminal(err error) (*TerminalError, bool) {
	var t *TerminalError
	ok := errors.As(err, &t)
	return t, ok
}
