// Package errors stands in for sigs.k8s.io/cluster-api/errors, which Cluster API v1.14 removed.
//
// The API packages of Cluster API Provider vSphere v1.16.1 (the newest release on the Go module
// proxy) still import it for one deprecated status field, VSphereMachine
// status.deprecated.v1beta1.failureReason, whose type is MachineStatusError. machina uses
// Cluster API v1.14, so go.mod replaces the removed package with this module; CAPV's types stay
// as they are. Delete this module (and its require and replace in go.mod) once a CAPV release
// built against Cluster API 1.14 or later is on the proxy.
package errors

// MachineStatusError is a machine-readable reason for a terminal failure of a Machine,
// reported in a deprecated status field.
type MachineStatusError string
