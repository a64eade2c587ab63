// Package authority is the vocabulary of machina's authority over a machine resource, shared
// by the sync and migration controllers, the gate, the operator metrics and the command line:
// the sync finalizer, the Synchronized condition and its reasons, the initial authority and
// the side a sync takes the spec from, pausing and unpausing a copy, the mirror and
// MachineHealthCheck annotations, the namespace pair, the conversion context of a platform,
// and the start check that the Machine API CRDs carry the authority fields.
//
// It holds words and the small writes that go with them, not decisions: whether a controller
// may act on an object is internal/gate's answer, and how a pair of copies is kept in step is
// the sync's (internal/controllers/sync). It imports neither, so both can import it.
package authority
