package api

import "time"

// FaultKind names a kind of injected fault.
type FaultKind string

const (
	// FaultError fails calls of Operation with StatusCode (500 InternalError by default,
	// or 503 ServiceUnavailable).
	FaultError FaultKind = "error"
	// FaultLatency delays calls of Operation by LatencyMillis.
	FaultLatency FaultKind = "latency"
	// FaultThrottle answers calls of Operation with 429 Throttling and a Retry-After of
	// RetryAfterSeconds (default 1).
	FaultThrottle FaultKind = "throttle"
	// FaultCapacity makes launches (RunInstances and scaling groups) in Zone and/or of
	// InstanceType fail with 503 InsufficientInstanceCapacity.
	FaultCapacity FaultKind = "capacity"
	// FaultNodeNotReady stops the Lease heartbeats of the scoped instances' Nodes and
	// sets their Ready condition to False.
	FaultNodeNotReady FaultKind = "node-not-ready"
	// FaultNodeCondition sets condition ConditionType to ConditionStatus on the scoped
	// instances' Nodes.
	FaultNodeCondition FaultKind = "node-condition"
)

// Fault is an injected misbehaviour. Faults are persisted: they survive restarts of the
// cloud until deleted or, with Count, until they have fired Count times.
//
// Scope: a fault with InstanceIDs and/or Tags only applies to calls about those instances
// (a RunInstances request matches by its tags; calls naming instance IDs match by ID or by
// the instances' tags) and, for node faults, to those instances' Nodes. A fault with no
// scope applies to every call of its Operation (node faults need a scope).
type Fault struct {
	FaultID string    `json:"faultID,omitempty"`
	Kind    FaultKind `json:"kind"`
	// Operation is an operation name such as RunInstances; empty means every operation.
	Operation string `json:"operation,omitempty"`
	// Rate is the probability (0 < Rate <= 1) that a matching call is hit; 0 means 1.
	// Draws come from the server's seeded random source.
	Rate float64 `json:"rate,omitempty"`
	// Count removes the fault after it fired this many times; 0 means unlimited.
	Count int `json:"count,omitempty"`

	StatusCode        int `json:"statusCode,omitempty"`
	LatencyMillis     int `json:"latencyMillis,omitempty"`
	RetryAfterSeconds int `json:"retryAfterSeconds,omitempty"`

	Zone         string `json:"zone,omitempty"`
	InstanceType string `json:"instanceType,omitempty"`

	InstanceIDs []string          `json:"instanceIDs,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`

	ConditionType   string `json:"conditionType,omitempty"`
	ConditionStatus string `json:"conditionStatus,omitempty"`
	Reason          string `json:"reason,omitempty"`
	Message         string `json:"message,omitempty"`

	// Fired counts how often the fault hit (status, set by the server).
	Fired     int       `json:"fired,omitempty"`
	CreatedAt time.Time `json:"createdAt,omitzero"`
}

// CreateFaultRequest injects a fault.
type CreateFaultRequest struct {
	Fault Fault `json:"fault"`
}

// CreateFaultResponse carries the stored fault with its ID.
type CreateFaultResponse struct {
	Fault Fault `json:"fault"`
}

// DescribeFaultsRequest is empty: every fault is listed.
type DescribeFaultsRequest struct{}

// DescribeFaultsResponse lists the active faults.
type DescribeFaultsResponse struct {
	Faults []Fault `json:"faults"`
}

// DeleteFaultsRequest removes the listed faults, or every fault when All is set.
// Unknown IDs are ignored.
type DeleteFaultsRequest struct {
	FaultIDs []string `json:"faultIDs,omitempty"`
	All      bool     `json:"all,omitempty"`
}

// DeleteFaultsResponse says how many faults were removed.
type DeleteFaultsResponse struct {
	Deleted int `json:"deleted"`
}

// OperationStats counts the calls of one operation since the server started.
type OperationStats struct {
	Calls     int64 `json:"calls"`
	Errors    int64 `json:"errors"`
	Throttled int64 `json:"throttled"`
	Injected  int64 `json:"injected"`
}

// GetStatsRequest is empty.
type GetStatsRequest struct{}

// Stats are the server's counters since it started (or since ResetStats). They are not
// persisted.
type Stats struct {
	Since      time.Time                 `json:"since"`
	Operations map[string]OperationStats `json:"operations"`
	// InstancesCreated counts instances actually launched (RunInstances calls that
	// returned an existing instance for a repeated token are not counted) and
	// InstancesLaunchedByGroups those launched by scaling groups.
	InstancesCreated          int64 `json:"instancesCreated"`
	InstancesLaunchedByGroups int64 `json:"instancesLaunchedByGroups"`
	InstancesTerminated       int64 `json:"instancesTerminated"`
	// InstancesByState counts the instances currently visible, by state.
	InstancesByState map[InstanceState]int `json:"instancesByState"`
}

// ResetStatsRequest is empty.
type ResetStatsRequest struct{}

// ResetStatsResponse is empty.
type ResetStatsResponse struct{}
