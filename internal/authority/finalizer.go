package authority

// SyncFinalizer is the sync controllers' finalizer: every mirrored Machine, MachineSet and
// MachineHealthCheck carries it, so the sync can carry a deletion across to the mirror before
// either object goes (see internal/controllers/sync).
const SyncFinalizer = "sync.machine.openshift.io/finalizer"
