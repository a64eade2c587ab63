// Package api holds the wire types of machina's simulated cloud: the JSON request and
// response bodies of every operation, the error body, the provider ID format and the
// instance states. The server (internal/cloud/server), the Go client
// (internal/cloud/client) and the simulated kubelet (internal/cloud/kubelet) share them.
//
// Every operation is a POST of a JSON request body to /v1/<Operation>; the response is
// a JSON body of the matching <Operation>Response type, or an Error with a 4xx/5xx status.
package api

import "time"

// InstanceState is the lifecycle state of an instance. The order is fixed:
// pending → running → shutting-down → terminated.
type InstanceState string

const (
	// StatePending means the instance was created and is booting.
	StatePending InstanceState = "pending"
	// StateRunning means the instance is up; its kubelet registers and heartbeats a Node.
	StateRunning InstanceState = "running"
	// StateShuttingDown means termination was requested; the instance is stopping.
	StateShuttingDown InstanceState = "shutting-down"
	// StateTerminated means the instance is gone. It stays visible to DescribeInstances for
	// the server's terminated retention, then disappears (is purged).
	StateTerminated InstanceState = "terminated"
	// StateStopping is an instance being stopped through the EC2 front (StopInstances).
	StateStopping InstanceState = "stopping"
	// StateStopped is a stopped instance; StartInstances makes it pending again.
	StateStopped InstanceState = "stopped"
)

// Valid reports whether s is one of the known states.
func (s InstanceState) Valid() bool {
	switch s {
	case StatePending, StateRunning, StateShuttingDown, StateTerminated, StateStopping, StateStopped:
		return true
	}
	return false
}

// Alive reports whether the instance is pending or running.
func (s InstanceState) Alive() bool { return s == StatePending || s == StateRunning }

// State reasons explain how an instance reached its current state.
const (
	ReasonUserInitiated    = "Client.UserInitiatedShutdown"
	ReasonInjectedKill     = "Server.InjectedKill"
	ReasonScalingGroup     = "Server.ScalingGroupScaleIn"
	ReasonGroupDeleted     = "Server.ScalingGroupDeleted"
	ReasonUnhealthyInGroup = "Server.ScalingGroupUnhealthyReplacement"
)

// Scaling group health of an instance.
const (
	HealthHealthy   = "Healthy"
	HealthUnhealthy = "Unhealthy"
)

// Instance is one virtual machine of the simulated cloud.
type Instance struct {
	InstanceID   string `json:"instanceID"`
	ProviderID   string `json:"providerID"`
	Region       string `json:"region"`
	Zone         string `json:"zone"`
	InstanceType string `json:"instanceType"`
	Image        string `json:"image"`
	Architecture string `json:"architecture"`

	State InstanceState `json:"state"`
	// StateReason says why the instance is shutting down or terminated.
	StateReason string `json:"stateReason,omitempty"`
	// StateTransitionTime is when the instance entered State.
	StateTransitionTime time.Time `json:"stateTransitionTime"`
	LaunchTime          time.Time `json:"launchTime"`

	PrivateIP string `json:"privateIP"`
	// Hostname is the private DNS name, <instance-id>.<region>.compute.internal. The
	// simulated kubelet uses it as the Node name.
	Hostname string `json:"hostname"`

	NetworkID      string `json:"networkID,omitempty"`
	ScalingGroupID string `json:"scalingGroupID,omitempty"`
	// Health is the scaling group health of a group member: Healthy or Unhealthy.
	Health string `json:"health,omitempty"`

	ClientToken string            `json:"clientToken"`
	Tags        map[string]string `json:"tags,omitempty"`
	// UserData is only returned when DescribeInstancesRequest.IncludeUserData is set.
	UserData []byte `json:"userData,omitempty"`
	// EC2 holds the attributes of an instance launched through the EC2 front; its
	// ProviderID is then aws:///<zone>/<instance-id>.
	EC2 *EC2Attributes `json:"ec2,omitempty"`
}

// RunInstancesRequest launches one instance. ClientToken is required: a second request
// with the same token returns the instance the first one created (in whatever state it
// is now, even terminated) and never launches another. Reusing a token with different
// parameters fails with IdempotentParameterMismatch.
type RunInstancesRequest struct {
	ClientToken  string `json:"clientToken"`
	Region       string `json:"region"`
	Zone         string `json:"zone"`
	InstanceType string `json:"instanceType"`
	Image        string `json:"image"`
	// UserData is base64 in JSON; its decoded size is limited (UserDataTooLarge).
	UserData  []byte            `json:"userData,omitempty"`
	Tags      map[string]string `json:"tags,omitempty"`
	NetworkID string            `json:"networkID,omitempty"`
}

// RunInstancesResponse carries the instance. Created is false when the client token had
// already been used and the existing instance is returned.
type RunInstancesResponse struct {
	Instance Instance `json:"instance"`
	Created  bool     `json:"created"`
}

// DescribeInstancesRequest selects instances. All given criteria must match. With
// InstanceIDs, every ID must exist (else InstanceNotFound naming the missing IDs).
type DescribeInstancesRequest struct {
	InstanceIDs []string `json:"instanceIDs,omitempty"`
	// Tags means every key must be present with exactly that value; the value "*" matches
	// any value of the key.
	Tags           map[string]string `json:"tags,omitempty"`
	States         []InstanceState   `json:"states,omitempty"`
	Region         string            `json:"region,omitempty"`
	Zone           string            `json:"zone,omitempty"`
	ScalingGroupID string            `json:"scalingGroupID,omitempty"`
	// IncludeUserData returns each instance's user data.
	IncludeUserData bool `json:"includeUserData,omitempty"`
}

// DescribeInstancesResponse lists the matching instances ordered by launch time.
type DescribeInstancesResponse struct {
	Instances []Instance `json:"instances"`
}

// TerminateInstancesRequest terminates instances. It is idempotent: terminating a
// shutting-down or terminated instance changes nothing and succeeds.
type TerminateInstancesRequest struct {
	InstanceIDs []string `json:"instanceIDs"`
}

// InstanceStateChange reports a state change made by a terminate or kill.
type InstanceStateChange struct {
	InstanceID    string        `json:"instanceID"`
	PreviousState InstanceState `json:"previousState"`
	CurrentState  InstanceState `json:"currentState"`
}

// TerminateInstancesResponse reports each instance's state before and after.
type TerminateInstancesResponse struct {
	Instances []InstanceStateChange `json:"instances"`
}

// KillInstancesRequest is a fault action: the selected alive instances terminate at once,
// behind the back of whoever created them (StateReason Server.InjectedKill). Select by
// InstanceIDs, by Tags, or both (union).
type KillInstancesRequest struct {
	InstanceIDs []string          `json:"instanceIDs,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
}

// KillInstancesResponse lists the instances killed.
type KillInstancesResponse struct {
	Instances []InstanceStateChange `json:"instances"`
}

// Network is an isolated address space instances can be launched into.
type Network struct {
	NetworkID string            `json:"networkID"`
	Region    string            `json:"region"`
	CIDR      string            `json:"cidr"`
	Tags      map[string]string `json:"tags,omitempty"`
	CreatedAt time.Time         `json:"createdAt"`
	// ClientToken makes CreateNetwork idempotent.
	ClientToken string `json:"clientToken"`
}

// CreateNetworkRequest creates a network. ClientToken is required and idempotent as for
// RunInstances. CIDR defaults to a fresh 10.N.0.0/16 and must be IPv4 between /8 and /28.
type CreateNetworkRequest struct {
	ClientToken string            `json:"clientToken"`
	Region      string            `json:"region"`
	CIDR        string            `json:"cidr,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
}

// CreateNetworkResponse carries the network; Created is false for a repeated token.
type CreateNetworkResponse struct {
	Network Network `json:"network"`
	Created bool    `json:"created"`
}

// DeleteNetworkRequest deletes a network. Deleting an unknown network succeeds (it is
// idempotent); a network with alive instances fails with DependencyViolation.
type DeleteNetworkRequest struct {
	NetworkID string `json:"networkID"`
}

// DeleteNetworkResponse is empty.
type DeleteNetworkResponse struct{}

// DescribeNetworksRequest selects networks by IDs (each must exist) and tags.
type DescribeNetworksRequest struct {
	NetworkIDs []string          `json:"networkIDs,omitempty"`
	Tags       map[string]string `json:"tags,omitempty"`
}

// DescribeNetworksResponse lists networks.
type DescribeNetworksResponse struct {
	Networks []Network `json:"networks"`
}
