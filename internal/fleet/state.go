package fleet

import (
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/controllers/migration"
	"github.com/machina-dev/machina/internal/mapicond"
)

// state is where one resource's move stands, read from its status.
type state struct {
	state   string
	done    bool
	failure string // why it cannot move; "" while it can
}

// stateOf reads where o's move to the API to stands.
func stateOf(o client.Object, to machinev1beta1.MachineAuthority) state {
	status, conds := statusOf(o), conditionsOf(o)
	if status == to {
		return state{state: "done", done: true}
	}
	if s := mapicond.Get(conds, authority.SynchronizedCondition); s != nil && s.Reason == authority.ConversionFailedReason {
		return state{state: "not synchronised", failure: s.Message}
	}
	m := mapicond.Get(conds, migration.MigrationCondition)
	switch {
	case status == machinev1beta1.MachineAuthorityMigrating && m != nil && m.Reason == migration.WaitingForPausedReason:
		return state{state: "migrating: pausing the old side"}
	case status == machinev1beta1.MachineAuthorityMigrating && m != nil && m.Reason == migration.WaitingForSyncReason:
		return state{state: "migrating: synchronising"}
	case status == machinev1beta1.MachineAuthorityMigrating:
		return state{state: "migrating"}
	case m != nil && m.Reason == migration.NotSynchronizedReason:
		return state{state: "waiting to be synchronised: " + m.Message}
	}
	return state{state: "synchronised, waiting for the migration controller"}
}

// statusOf is o's current authority.
func statusOf(o client.Object) machinev1beta1.MachineAuthority {
	switch x := o.(type) {
	case *machinev1beta1.Machine:
		return x.Status.AuthoritativeAPI
	case *machinev1beta1.MachineSet:
		return x.Status.AuthoritativeAPI
	case *machinev1beta1.MachineHealthCheck:
		return mhcStatus(x)
	}
	return ""
}

func conditionsOf(o client.Object) []machinev1beta1.Condition {
	switch x := o.(type) {
	case *machinev1beta1.Machine:
		return x.Status.Conditions
	case *machinev1beta1.MachineSet:
		return x.Status.Conditions
	case *machinev1beta1.MachineHealthCheck:
		return x.Status.Conditions
	}
	return nil
}

// mhcStatus is a MachineHealthCheck's current authority: its type has no status field for it,
// so it is an annotation (see internal/gate); unset means the Machine API.
func mhcStatus(h *machinev1beta1.MachineHealthCheck) machinev1beta1.MachineAuthority {
	if s := machinev1beta1.MachineAuthority(h.Annotations[authority.MHCStatusAuthoritativeAPIAnnotation]); s != "" {
		return s
	}
	return machinev1beta1.MachineAuthorityMachineAPI
}
