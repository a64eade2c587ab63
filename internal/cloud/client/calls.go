package client

import (
	"context"

	"github.com/machina-dev/machina/internal/cloud/api"
)

// RunInstances launches an instance, or returns the one an earlier call with the same
// client token launched (Created false).
func (c *Client) RunInstances(ctx context.Context, req api.RunInstancesRequest) (*api.RunInstancesResponse, error) {
	var out api.RunInstancesResponse
	if err := c.Call(ctx, api.OpRunInstances, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DescribeInstances lists instances matching req.
func (c *Client) DescribeInstances(ctx context.Context, req api.DescribeInstancesRequest) ([]api.Instance, error) {
	var out api.DescribeInstancesResponse
	if err := c.Call(ctx, api.OpDescribeInstances, req, &out); err != nil {
		return nil, err
	}
	return out.Instances, nil
}

// GetInstance returns one instance; IsNotFound(err) once it is unknown or purged.
func (c *Client) GetInstance(ctx context.Context, id string) (*api.Instance, error) {
	l, err := c.DescribeInstances(ctx, api.DescribeInstancesRequest{InstanceIDs: []string{id}})
	if err != nil {
		return nil, err
	}
	if len(l) != 1 {
		return nil, api.Errorf(api.CodeInstanceNotFound, "instanceIDs", "instance %s does not exist", id)
	}
	return &l[0], nil
}

// TerminateInstances terminates instances (idempotently).
func (c *Client) TerminateInstances(ctx context.Context, ids ...string) ([]api.InstanceStateChange, error) {
	var out api.TerminateInstancesResponse
	if err := c.Call(ctx, api.OpTerminateInstances, api.TerminateInstancesRequest{InstanceIDs: ids}, &out); err != nil {
		return nil, err
	}
	return out.Instances, nil
}

// KillInstances is a fault: the selected instances terminate at once.
func (c *Client) KillInstances(ctx context.Context, req api.KillInstancesRequest) ([]api.InstanceStateChange, error) {
	var out api.KillInstancesResponse
	if err := c.Call(ctx, api.OpKillInstances, req, &out); err != nil {
		return nil, err
	}
	return out.Instances, nil
}

// DescribeRegions lists the regions and zones.
func (c *Client) DescribeRegions(ctx context.Context) ([]api.Region, error) {
	var out api.DescribeRegionsResponse
	if err := c.Call(ctx, api.OpDescribeRegions, api.DescribeRegionsRequest{}, &out); err != nil {
		return nil, err
	}
	return out.Regions, nil
}

// DescribeInstanceTypes lists the named instance types, or all of them.
func (c *Client) DescribeInstanceTypes(ctx context.Context, names ...string) ([]api.InstanceType, error) {
	var out api.DescribeInstanceTypesResponse
	if err := c.Call(ctx, api.OpDescribeInstanceTypes, api.DescribeInstanceTypesRequest{Names: names}, &out); err != nil {
		return nil, err
	}
	return out.InstanceTypes, nil
}

// DescribeImages lists the named images, or all of them.
func (c *Client) DescribeImages(ctx context.Context, ids ...string) ([]api.Image, error) {
	var out api.DescribeImagesResponse
	if err := c.Call(ctx, api.OpDescribeImages, api.DescribeImagesRequest{ImageIDs: ids}, &out); err != nil {
		return nil, err
	}
	return out.Images, nil
}

// CreateNetwork creates a network (idempotent by client token).
func (c *Client) CreateNetwork(ctx context.Context, req api.CreateNetworkRequest) (*api.CreateNetworkResponse, error) {
	var out api.CreateNetworkResponse
	if err := c.Call(ctx, api.OpCreateNetwork, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteNetwork deletes a network; deleting an unknown network succeeds.
func (c *Client) DeleteNetwork(ctx context.Context, id string) error {
	return c.Call(ctx, api.OpDeleteNetwork, api.DeleteNetworkRequest{NetworkID: id}, nil)
}

// DescribeNetworks lists networks.
func (c *Client) DescribeNetworks(ctx context.Context, req api.DescribeNetworksRequest) ([]api.Network, error) {
	var out api.DescribeNetworksResponse
	if err := c.Call(ctx, api.OpDescribeNetworks, req, &out); err != nil {
		return nil, err
	}
	return out.Networks, nil
}

// CreateScalingGroup creates a scaling group (idempotent by name).
func (c *Client) CreateScalingGroup(ctx context.Context, req api.CreateScalingGroupRequest) (*api.CreateScalingGroupResponse, error) {
	var out api.CreateScalingGroupResponse
	if err := c.Call(ctx, api.OpCreateScalingGroup, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateScalingGroup changes a group's desired capacity, launch template or zones.
func (c *Client) UpdateScalingGroup(ctx context.Context, req api.UpdateScalingGroupRequest) (*api.ScalingGroup, error) {
	var out api.UpdateScalingGroupResponse
	if err := c.Call(ctx, api.OpUpdateScalingGroup, req, &out); err != nil {
		return nil, err
	}
	return &out.ScalingGroup, nil
}

// DeleteScalingGroup deletes a group and terminates its instances.
func (c *Client) DeleteScalingGroup(ctx context.Context, id string) error {
	return c.Call(ctx, api.OpDeleteScalingGroup, api.DeleteScalingGroupRequest{ScalingGroupID: id}, nil)
}

// DescribeScalingGroups lists groups.
func (c *Client) DescribeScalingGroups(ctx context.Context, req api.DescribeScalingGroupsRequest) ([]api.ScalingGroup, error) {
	var out api.DescribeScalingGroupsResponse
	if err := c.Call(ctx, api.OpDescribeScalingGroups, req, &out); err != nil {
		return nil, err
	}
	return out.ScalingGroups, nil
}

// GetScalingGroup returns one group; IsNotFound(err) if it does not exist.
func (c *Client) GetScalingGroup(ctx context.Context, id string) (*api.ScalingGroup, error) {
	l, err := c.DescribeScalingGroups(ctx, api.DescribeScalingGroupsRequest{ScalingGroupIDs: []string{id}})
	if err != nil {
		return nil, err
	}
	return &l[0], nil
}

// TerminateInstanceInScalingGroup terminates one group member, shrinking the group when
// decrement is set (else the group replaces it).
func (c *Client) TerminateInstanceInScalingGroup(ctx context.Context, id string, decrement bool) (*api.TerminateInstanceInScalingGroupResponse, error) {
	var out api.TerminateInstanceInScalingGroupResponse
	req := api.TerminateInstanceInScalingGroupRequest{InstanceID: id, DecrementDesiredCapacity: decrement}
	if err := c.Call(ctx, api.OpTerminateInstanceInScalingGroup, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetInstanceHealth marks a group member Healthy or Unhealthy (it is then replaced).
func (c *Client) SetInstanceHealth(ctx context.Context, id, health string) error {
	return c.Call(ctx, api.OpSetInstanceHealth, api.SetInstanceHealthRequest{InstanceID: id, Health: health}, nil)
}

// CreateFault injects a fault and returns it with its ID.
func (c *Client) CreateFault(ctx context.Context, f api.Fault) (*api.Fault, error) {
	var out api.CreateFaultResponse
	if err := c.Call(ctx, api.OpCreateFault, api.CreateFaultRequest{Fault: f}, &out); err != nil {
		return nil, err
	}
	return &out.Fault, nil
}

// DescribeFaults lists the active faults.
func (c *Client) DescribeFaults(ctx context.Context) ([]api.Fault, error) {
	var out api.DescribeFaultsResponse
	if err := c.Call(ctx, api.OpDescribeFaults, api.DescribeFaultsRequest{}, &out); err != nil {
		return nil, err
	}
	return out.Faults, nil
}

// DeleteFaults removes faults by ID and returns how many were removed.
func (c *Client) DeleteFaults(ctx context.Context, ids ...string) (int, error) {
	var out api.DeleteFaultsResponse
	if err := c.Call(ctx, api.OpDeleteFaults, api.DeleteFaultsRequest{FaultIDs: ids}, &out); err != nil {
		return 0, err
	}
	return out.Deleted, nil
}

// ClearFaults removes every fault.
func (c *Client) ClearFaults(ctx context.Context) (int, error) {
	var out api.DeleteFaultsResponse
	if err := c.Call(ctx, api.OpDeleteFaults, api.DeleteFaultsRequest{All: true}, &out); err != nil {
		return 0, err
	}
	return out.Deleted, nil
}

// Stats returns the server's call counters.
func (c *Client) Stats(ctx context.Context) (*api.Stats, error) {
	var out api.Stats
	if err := c.Call(ctx, api.OpGetStats, api.GetStatsRequest{}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ResetStats zeroes the server's call counters.
func (c *Client) ResetStats(ctx context.Context) error {
	return c.Call(ctx, api.OpResetStats, api.ResetStatsRequest{}, nil)
}
