package authority

import machinev1beta1 "github.com/openshift/api/machine/v1beta1"

// InitialAuthority is the status.authoritativeAPI a Machine API Machine or MachineSet starts
// with, decided from its spec alone as machine-api-operator's controllers decide it: the
// authority the spec asks for, or MachineAPI when the spec asks for none. Every controller
// that initialises an empty status (the gate, the sync) uses this one rule, so whichever
// comes first, the answer is the same.
func InitialAuthority(spec machinev1beta1.MachineAuthority) machinev1beta1.MachineAuthority {
	if spec == "" {
		return machinev1beta1.MachineAuthorityMachineAPI
	}
	return spec
}

// SynchronizedAPIOf is the status.synchronizedAPI value that goes with an authority.
func SynchronizedAPIOf(a machinev1beta1.MachineAuthority) machinev1beta1.SynchronizedAPI {
	if a == machinev1beta1.MachineAuthorityClusterAPI {
		return machinev1beta1.ClusterAPISynchronized
	}
	return machinev1beta1.MachineAPISynchronized
}

// SyncSource is the side a sync pass takes the spec from, and what it does with the pause of
// the other side's copies. Outside a migration that is the authoritative side; while one is
// under way (status Migrating) the copies keep being synchronised from the side that was
// authoritative (status.synchronizedAPI), so a change made meanwhile — a scale by the
// autoscaler or a user, a late providerID — reaches the other side and the handover, which
// waits for the latest generation to be synchronised, moves on.
func SyncSource(status machinev1beta1.MachineAuthority, synchronizedAPI machinev1beta1.SynchronizedAPI) (machinev1beta1.MachineAuthority, Pause) {
	switch status {
	case machinev1beta1.MachineAuthorityMigrating:
		from := machinev1beta1.MachineAuthorityMachineAPI
		if synchronizedAPI == machinev1beta1.ClusterAPISynchronized {
			from = machinev1beta1.MachineAuthorityClusterAPI
		}
		return from, KeepPause
	case machinev1beta1.MachineAuthorityClusterAPI:
		return status, Unpause
	}
	return machinev1beta1.MachineAuthorityMachineAPI, PauseMirror
}
