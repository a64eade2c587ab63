package maomachine

import (
	"context"
	"errors"
	"fmt"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	maoctrl "github.com/openshift/machine-api-operator/pkg/controller/machine"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/machineapi/machine"
	"github.com/machina-dev/machina/internal/patch"
)

// Actuator is a machina actuator seen through machine-api-operator's Actuator interface.
// The method signatures are the same; two contracts differ:
//
//   - machina's controller stores what an actuator changed in the Machine (provider ID,
//     addresses, provider status, labels, annotations, conditions), while machine-api-operator's
//     leaves that to the actuator (machine-api-provider-aws patches the Machine itself before
//     returning): Actuator stores those changes after each call.
//   - Their errors: machina's RequeueAfterError and TerminalError become machine-api-operator's
//     RequeueAfterError and MachineError, so its controller requeues, or fails the Machine on
//     an invalid configuration, as it would for its own providers.
type Actuator struct {
	// Machina is the actuator called.
	Machina machine.Actuator
	// Client stores the Machine's changes.
	Client client.Client
}

var _ maoctrl.Actuator = &Actuator{}

// Exists reports whether the Machine's instance exists.
func (a *Actuator) Exists(ctx context.Context, m *machinev1beta1.Machine) (bool, error) {
	before := m.DeepCopy()
	ok, err := a.Machina.Exists(ctx, m)
	return ok, a.finish(ctx, m, before, err)
}

// Create launches the Machine's instance.
func (a *Actuator) Create(ctx context.Context, m *machinev1beta1.Machine) error {
	return a.call(ctx, m, a.Machina.Create)
}

// Update refreshes what the Machine says of its instance.
func (a *Actuator) Update(ctx context.Context, m *machinev1beta1.Machine) error {
	return a.call(ctx, m, a.Machina.Update)
}

// Delete terminates the Machine's instance.
func (a *Actuator) Delete(ctx context.Context, m *machinev1beta1.Machine) error {
	return a.call(ctx, m, a.Machina.Delete)
}

func (a *Actuator) call(ctx context.Context, m *machinev1beta1.Machine, f func(context.Context, *machinev1beta1.Machine) error) error {
	before := m.DeepCopy()
	return a.finish(ctx, m, before, f(ctx, m))
}

// finish stores the Machine's changes since before, even when the call failed (a refused
// launch leaves its condition to report), and translates the call's error.
func (a *Actuator) finish(ctx context.Context, m, before *machinev1beta1.Machine, err error) error {
	if serr := a.store(ctx, m, before); serr != nil {
		return errors.Join(translate(err), fmt.Errorf("storing Machine %s: %w", m.Name, serr))
	}
	return translate(err)
}

// store writes metadata and spec, then status, each only when it changed and locked to the
// version read. A write that loses to another writer is not given up (see rebase): the
// changes are carried onto the Machine as stored now and written again. The spec write
// answers with the stored status, so the status to write is kept aside and based on the
// version that write produced. m ends as stored.
func (a *Actuator) store(ctx context.Context, m, before *machinev1beta1.Machine) error {
	want := m.DeepCopy()
	return retry.RetryOnConflict(storeBackoff, func() error {
		err := a.storeOnce(ctx, m, before)
		if !apierrors.IsConflict(err) {
			return err
		}
		fresh := &machinev1beta1.Machine{}
		if gerr := a.Client.Get(ctx, client.ObjectKeyFromObject(m), fresh); gerr != nil {
			return gerr
		}
		next, rerr := rebase(fresh, before, want)
		if rerr != nil {
			return rerr
		}
		*before, *m = *fresh, *next
		return err
	})
}

// storeBackoff spaces the tries of a store that lost to other writers: the manager's cache,
// which the next try reads, may lag the write that won by a moment.
var storeBackoff = wait.Backoff{Steps: 8, Duration: 50 * time.Millisecond, Factor: 2, Cap: 2 * time.Second}

func (a *Actuator) storeOnce(ctx context.Context, m, before *machinev1beta1.Machine) error {
	status := m.Status.DeepCopy()
	if err := patch.Store(ctx, a.Client, m, before); err != nil {
		return err
	}
	base := m.DeepCopy()
	base.Status = *before.Status.DeepCopy()
	m.Status = *status
	return patch.StoreStatus(ctx, a.Client, m, base)
}

// translate turns machina's actuator errors into the ones machine-api-operator's controller
// acts on, keeping machina's message (and error chain) in the result.
func translate(err error) error {
	if rq, ok := errors.AsType[*machine.RequeueAfterError](err); ok {
		return fmt.Errorf("%w: %w", &maoctrl.RequeueAfterError{RequeueAfter: rq.After}, err)
	}
	if t, ok := errors.AsType[*machine.TerminalError](err); ok {
		return fmt.Errorf("%w: %w", &maoctrl.MachineError{Reason: t.Reason, Message: t.Message}, err)
	}
	return err
}
