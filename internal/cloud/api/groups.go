package api

import "time"

// LaunchTemplate is what a scaling group launches its instances from.
type LaunchTemplate struct {
	InstanceType string            `json:"instanceType"`
	Image        string            `json:"image"`
	UserData     []byte            `json:"userData,omitempty"`
	Tags         map[string]string `json:"tags,omitempty"`
}

// ScalingGroup keeps DesiredCapacity alive instances spread over Zones: it launches
// replacements for instances that terminate or are marked Unhealthy, and scales in
// (newest first) when there are too many.
type ScalingGroup struct {
	ScalingGroupID  string            `json:"scalingGroupID"`
	Name            string            `json:"name"`
	Region          string            `json:"region"`
	Zones           []string          `json:"zones"`
	NetworkID       string            `json:"networkID,omitempty"`
	DesiredCapacity int               `json:"desiredCapacity"`
	LaunchTemplate  LaunchTemplate    `json:"launchTemplate"`
	Tags            map[string]string `json:"tags,omitempty"`
	// LaunchTemplateVersion counts updates of LaunchTemplate, starting at 1.
	LaunchTemplateVersion int       `json:"launchTemplateVersion"`
	CreatedAt             time.Time `json:"createdAt"`

	// Instances are the group's alive (pending or running) members.
	Instances []GroupInstance `json:"instances"`
	// LastActivity describes the group's last launch failure, if any (e.g. capacity).
	LastActivity string `json:"lastActivity,omitempty"`
}

// GroupInstance is one member of a scaling group.
type GroupInstance struct {
	InstanceID            string        `json:"instanceID"`
	ProviderID            string        `json:"providerID"`
	Zone                  string        `json:"zone"`
	State                 InstanceState `json:"state"`
	Health                string        `json:"health"`
	LaunchTemplateVersion int           `json:"launchTemplateVersion"`
}

// CreateScalingGroupRequest creates a group. Name is unique and makes the call idempotent:
// creating an existing name with the same parameters returns it, with different
// parameters fails with AlreadyExists.
type CreateScalingGroupRequest struct {
	Name            string            `json:"name"`
	Region          string            `json:"region"`
	Zones           []string          `json:"zones"`
	NetworkID       string            `json:"networkID,omitempty"`
	DesiredCapacity int               `json:"desiredCapacity"`
	LaunchTemplate  LaunchTemplate    `json:"launchTemplate"`
	Tags            map[string]string `json:"tags,omitempty"`
}

// CreateScalingGroupResponse carries the group; Created is false for an existing name.
type CreateScalingGroupResponse struct {
	ScalingGroup ScalingGroup `json:"scalingGroup"`
	Created      bool         `json:"created"`
}

// UpdateScalingGroupRequest changes the desired capacity, the launch template (new
// instances use it; existing ones keep theirs) or the zones. Nil fields are unchanged.
type UpdateScalingGroupRequest struct {
	ScalingGroupID  string          `json:"scalingGroupID"`
	DesiredCapacity *int            `json:"desiredCapacity,omitempty"`
	LaunchTemplate  *LaunchTemplate `json:"launchTemplate,omitempty"`
	Zones           []string        `json:"zones,omitempty"`
}

// UpdateScalingGroupResponse carries the updated group.
type UpdateScalingGroupResponse struct {
	ScalingGroup ScalingGroup `json:"scalingGroup"`
}

// DeleteScalingGroupRequest deletes a group and terminates its instances. Deleting an
// unknown group succeeds.
type DeleteScalingGroupRequest struct {
	ScalingGroupID string `json:"scalingGroupID"`
}

// DeleteScalingGroupResponse is empty.
type DeleteScalingGroupResponse struct{}

// DescribeScalingGroupsRequest selects groups by IDs (each must exist) or names.
type DescribeScalingGroupsRequest struct {
	ScalingGroupIDs []string `json:"scalingGroupIDs,omitempty"`
	Names           []string `json:"names,omitempty"`
}

// DescribeScalingGroupsResponse lists groups.
type DescribeScalingGroupsResponse struct {
	ScalingGroups []ScalingGroup `json:"scalingGroups"`
}

// TerminateInstanceInScalingGroupRequest terminates one member. With
// DecrementDesiredCapacity the group shrinks by one; otherwise it launches a replacement.
type TerminateInstanceInScalingGroupRequest struct {
	InstanceID               string `json:"instanceID"`
	DecrementDesiredCapacity bool   `json:"decrementDesiredCapacity"`
}

// TerminateInstanceInScalingGroupResponse carries the change and the group afterwards.
type TerminateInstanceInScalingGroupResponse struct {
	Change       InstanceStateChange `json:"change"`
	ScalingGroup ScalingGroup        `json:"scalingGroup"`
}

// SetInstanceHealthRequest marks a group member Healthy or Unhealthy. The group
// terminates and replaces Unhealthy members.
type SetInstanceHealthRequest struct {
	InstanceID string `json:"instanceID"`
	Health     string `json:"health"`
}

// SetInstanceHealthResponse is empty.
type SetInstanceHealthResponse struct{}
