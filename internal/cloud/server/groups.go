package server

import (
	"context"
	"fmt"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/machina-dev/machina/internal/cloud/api"
)

const maxGroupCapacity = 10000

func (s *Server) validateZones(region string, zones []string) *api.Error {
	if len(zones) == 0 {
		return api.Errorf(api.CodeMissingParameter, "zones", "zones is required (at least one zone of the region)")
	}
	for _, z := range zones {
		if r, ok := s.cat.zones[z]; !ok || r != region {
			return api.Errorf(api.CodeInvalidZone, "zones", "unknown zone %q in region %q", z, region)
		}
	}
	return nil
}

func validateCapacity(n int) *api.Error {
	if n < 0 || n > maxGroupCapacity {
		return api.Errorf(api.CodeInvalidParameterValue, "desiredCapacity", "desiredCapacity must be between 0 and %d", maxGroupCapacity)
	}
	return nil
}

func (s *Server) createScalingGroup(_ context.Context, r *api.CreateScalingGroupRequest) (any, error) {
	if r.Name == "" {
		return nil, api.Errorf(api.CodeMissingParameter, "name", "name is required")
	}
	if len(r.Name) > 128 {
		return nil, api.Errorf(api.CodeInvalidParameterValue, "name", "name is at most 128 characters")
	}
	lt := r.LaunchTemplate
	if err := s.validateLaunch("launchTemplate.", r.Region, "", lt.InstanceType, lt.Image, lt.UserData, false); err != nil {
		return nil, err
	}
	if err := s.validateZones(r.Region, r.Zones); err != nil {
		return nil, err
	}
	if err := validateCapacity(r.DesiredCapacity); err != nil {
		return nil, err
	}
	if err := validateTags("tags", r.Tags); err != nil {
		return nil, err
	}
	if err := validateTags("launchTemplate.tags", lt.Tags); err != nil {
		return nil, err
	}
	hash := requestHash(r)
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.NetworkID != "" {
		if n, ok := s.nets[r.NetworkID]; !ok || n.Region != r.Region {
			return nil, api.Errorf(api.CodeNetworkNotFound, "networkID", "network %q does not exist in region %q", r.NetworkID, r.Region)
		}
	}
	if id, ok := s.gname[r.Name]; ok {
		g := s.grps[id]
		if g.RequestHash != hash {
			return nil, api.Errorf(api.CodeAlreadyExists, "name", "scaling group %q already exists (%s) with different parameters", r.Name, id)
		}
		return &api.CreateScalingGroupResponse{ScalingGroup: s.groupView(g, now), Created: false}, nil
	}
	g := &group{ScalingGroup: api.ScalingGroup{
		ScalingGroupID: randomID("sg-"), Name: r.Name, Region: r.Region, Zones: append([]string(nil), r.Zones...),
		NetworkID: r.NetworkID, DesiredCapacity: r.DesiredCapacity, LaunchTemplate: lt, Tags: copyTags(r.Tags),
		LaunchTemplateVersion: 1, CreatedAt: now,
	}, RequestHash: hash}
	if err := s.update(func(tx *bolt.Tx) error { return putJSON(tx, bucketGroups, g.ScalingGroupID, g) }); err != nil {
		return nil, err
	}
	s.grps[g.ScalingGroupID] = g
	s.gname[g.Name] = g.ScalingGroupID
	if err := s.reconcileGroupLocked(g, now); err != nil {
		return nil, err
	}
	return &api.CreateScalingGroupResponse{ScalingGroup: s.groupView(g, now), Created: true}, nil
}

func (s *Server) groupOrNotFound(id string) (*group, error) {
	if id == "" {
		return nil, api.Errorf(api.CodeMissingParameter, "scalingGroupID", "scalingGroupID is required")
	}
	g, ok := s.grps[id]
	if !ok {
		return nil, api.Errorf(api.CodeScalingGroupNotFound, "scalingGroupID", "scaling group %q does not exist", id)
	}
	return g, nil
}

func (s *Server) updateScalingGroup(_ context.Context, r *api.UpdateScalingGroupRequest) (any, error) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := s.groupOrNotFound(r.ScalingGroupID)
	if err != nil {
		return nil, err
	}
	n := *g
	if r.DesiredCapacity != nil {
		if err := validateCapacity(*r.DesiredCapacity); err != nil {
			return nil, err
		}
		n.DesiredCapacity = *r.DesiredCapacity
	}
	if r.LaunchTemplate != nil {
		lt := *r.LaunchTemplate
		if err := s.validateLaunch("launchTemplate.", g.Region, "", lt.InstanceType, lt.Image, lt.UserData, false); err != nil {
			return nil, err
		}
		if err := validateTags("launchTemplate.tags", lt.Tags); err != nil {
			return nil, err
		}
		if requestHash(lt) != requestHash(g.LaunchTemplate) {
			n.LaunchTemplate = lt
			n.LaunchTemplateVersion++
		}
	}
	if len(r.Zones) > 0 {
		if err := s.validateZones(g.Region, r.Zones); err != nil {
			return nil, err
		}
		n.Zones = append([]string(nil), r.Zones...)
	}
	if err := s.update(func(tx *bolt.Tx) error { return putJSON(tx, bucketGroups, n.ScalingGroupID, &n) }); err != nil {
		return nil, err
	}
	s.grps[n.ScalingGroupID] = &n
	if err := s.reconcileGroupLocked(&n, now); err != nil {
		return nil, err
	}
	return &api.UpdateScalingGroupResponse{ScalingGroup: s.groupView(&n, now)}, nil
}

func (s *Server) deleteScalingGroup(_ context.Context, r *api.DeleteScalingGroupRequest) (any, error) {
	if r.ScalingGroupID == "" {
		return nil, api.Errorf(api.CodeMissingParameter, "scalingGroupID", "scalingGroupID is required")
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.grps[r.ScalingGroupID]
	if !ok {
		return &api.DeleteScalingGroupResponse{}, nil
	}
	var ids []string
	for _, i := range s.membersLocked(g.ScalingGroupID, now) {
		ids = append(ids, i.ID)
	}
	// The members' terminations and the group's removal commit together.
	_, err := s.terminateLocked(ids, api.ReasonGroupDeleted, s.opts.Delays.ShuttingDown, now,
		func(tx *bolt.Tx) error { return deleteKey(tx, bucketGroups, g.ScalingGroupID) })
	if err != nil {
		return nil, err
	}
	delete(s.grps, g.ScalingGroupID)
	delete(s.gname, g.Name)
	return &api.DeleteScalingGroupResponse{}, nil
}

func (s *Server) describeScalingGroups(_ context.Context, r *api.DescribeScalingGroupsRequest) (any, error) {
	now := s.now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := &api.DescribeScalingGroupsResponse{ScalingGroups: []api.ScalingGroup{}}
	for _, id := range r.ScalingGroupIDs {
		g, ok := s.grps[id]
		if !ok {
			return nil, api.Errorf(api.CodeScalingGroupNotFound, "scalingGroupIDs", "scaling group %q does not exist", id)
		}
		out.ScalingGroups = append(out.ScalingGroups, s.groupView(g, now))
	}
	for _, name := range r.Names {
		if id, ok := s.gname[name]; ok {
			out.ScalingGroups = append(out.ScalingGroups, s.groupView(s.grps[id], now))
		}
	}
	if len(r.ScalingGroupIDs) == 0 && len(r.Names) == 0 {
		for _, g := range s.grps {
			out.ScalingGroups = append(out.ScalingGroups, s.groupView(g, now))
		}
		sort.Slice(out.ScalingGroups, func(a, b int) bool { return out.ScalingGroups[a].Name < out.ScalingGroups[b].Name })
	}
	return out, nil
}

// memberOrError finds a scaling group member by instance ID.
func (s *Server) memberOrError(id string, now time.Time) (*instance, *group, error) {
	if id == "" {
		return nil, nil, api.Errorf(api.CodeMissingParameter, "instanceID", "instanceID is required")
	}
	i, ok := s.inst[id]
	if !ok || !s.visible(i, now) {
		return nil, nil, api.Errorf(api.CodeInstanceNotFound, "instanceID", "instance %q does not exist", id)
	}
	g, ok := s.grps[i.GroupID]
	if i.GroupID == "" || !ok {
		return nil, nil, api.Errorf(api.CodeNotInScalingGroup, "instanceID", "instance %q is not in a scaling group", id)
	}
	return i, g, nil
}

func (s *Server) terminateInstanceInScalingGroup(_ context.Context, r *api.TerminateInstanceInScalingGroupRequest) (any, error) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	i, g, err := s.memberOrError(r.InstanceID, now)
	if err != nil {
		return nil, err
	}
	prev, _ := i.stateAt(now)
	// The termination and the smaller capacity commit together: a retry after a crash
	// finds both or neither.
	n := *g
	var extra func(tx *bolt.Tx) error
	if r.DecrementDesiredCapacity && prev.Alive() && g.DesiredCapacity > 0 {
		n.DesiredCapacity--
		extra = func(tx *bolt.Tx) error { return putJSON(tx, bucketGroups, n.ScalingGroupID, &n) }
	}
	changes, err := s.terminateLocked([]string{i.ID}, api.ReasonScalingGroup, s.opts.Delays.ShuttingDown, now, extra)
	if err != nil {
		return nil, err
	}
	if extra != nil {
		s.grps[n.ScalingGroupID] = &n
		g = &n
	}
	if err := s.reconcileGroupLocked(g, now); err != nil {
		return nil, err
	}
	return &api.TerminateInstanceInScalingGroupResponse{Change: changes[0], ScalingGroup: s.groupView(g, now)}, nil
}

func (s *Server) setInstanceHealth(_ context.Context, r *api.SetInstanceHealthRequest) (any, error) {
	if r.Health != api.HealthHealthy && r.Health != api.HealthUnhealthy {
		return nil, api.Errorf(api.CodeInvalidParameterValue, "health", "health must be Healthy or Unhealthy, got %q", r.Health)
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	i, g, err := s.memberOrError(r.InstanceID, now)
	if err != nil {
		return nil, err
	}
	n := *i
	n.Health = r.Health
	if err := s.update(func(tx *bolt.Tx) error { return putJSON(tx, bucketInstances, n.ID, &n) }); err != nil {
		return nil, err
	}
	s.setInstance(&n)
	if err := s.reconcileGroupLocked(g, now); err != nil {
		return nil, err
	}
	return &api.SetInstanceHealthResponse{}, nil
}

// membersLocked returns the group's alive members, oldest first.
func (s *Server) membersLocked(groupID string, now time.Time) []*instance {
	var out []*instance
	for _, i := range s.inst {
		if st, _ := i.stateAt(now); i.GroupID == groupID && st.Alive() {
			out = append(out, i)
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if !out[a].LaunchTime.Equal(out[b].LaunchTime) {
			return out[a].LaunchTime.Before(out[b].LaunchTime)
		}
		return out[a].ID < out[b].ID
	})
	return out
}

func (s *Server) groupView(g *group, now time.Time) api.ScalingGroup {
	out := g.ScalingGroup
	out.Zones = append([]string(nil), g.Zones...)
	out.Tags = copyTags(g.Tags)
	out.LaunchTemplate.UserData = nil
	out.Instances = []api.GroupInstance{}
	for _, i := range s.membersLocked(g.ScalingGroupID, now) {
		st, _ := i.stateAt(now)
		out.Instances = append(out.Instances, api.GroupInstance{
			InstanceID: i.ID, ProviderID: api.FormatProviderID(i.Region, i.Zone, i.ID), Zone: i.Zone,
			State: st, Health: i.Health, LaunchTemplateVersion: i.LTVersion,
		})
	}
	return out
}

// reconcileGroups brings every group to its desired capacity.
func (s *Server) reconcileGroups(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.grps {
		if err := s.reconcileGroupLocked(g, now); err != nil {
			s.log.Error(err, "reconciling scaling group", "group", g.ScalingGroupID)
		}
	}
}

// reconcileGroupLocked replaces unhealthy members, scales in (newest first) or launches
// instances in the least used zones. The caller holds s.mu.
func (s *Server) reconcileGroupLocked(g *group, now time.Time) error {
	members := s.membersLocked(g.ScalingGroupID, now)
	var unhealthy []string
	healthy := members[:0:0]
	for _, i := range members {
		if i.Health == api.HealthUnhealthy {
			unhealthy = append(unhealthy, i.ID)
		} else {
			healthy = append(healthy, i)
		}
	}
	if len(unhealthy) > 0 {
		if _, err := s.terminateLocked(unhealthy, api.ReasonUnhealthyInGroup, s.opts.Delays.ShuttingDown, now, nil); err != nil {
			return err
		}
	}
	if extra := len(healthy) - g.DesiredCapacity; extra > 0 {
		var ids []string
		for _, i := range healthy[len(healthy)-extra:] {
			ids = append(ids, i.ID)
		}
		if _, err := s.terminateLocked(ids, api.ReasonScalingGroup, s.opts.Delays.ShuttingDown, now, nil); err != nil {
			return err
		}
		// A group above its capacity misses no launch: a failure recorded by the pass before
		// (a catch-up that met a capacity fault in one zone) is no longer its state.
		return s.setActivityLocked(g, "")
	}
	missing := g.DesiredCapacity - len(healthy)
	if missing <= 0 {
		return s.setActivityLocked(g, "")
	}
	perZone := map[string]int{}
	for _, i := range healthy {
		perZone[i.Zone]++
	}
	lt := g.LaunchTemplate
	tags := copyTags(lt.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	for k, v := range g.Tags {
		tags[k] = v
	}
	// Choose zones first: capacity faults are checked (and counted) outside the write
	// transaction.
	var plan []string
	var lastErr error
	blocked := map[string]bool{}
	for len(plan) < missing {
		zone := ""
		for _, z := range g.Zones {
			if !blocked[z] && (zone == "" || perZone[z] < perZone[zone]) {
				zone = z
			}
		}
		if zone == "" {
			break
		}
		if err := s.capacityFault(zone, lt.InstanceType, tags); err != nil {
			blocked[zone] = true
			lastErr = err
			continue
		}
		perZone[zone]++
		plan = append(plan, zone)
	}
	var launched []*instance
	err := s.updateIf(len(plan) > 0, func(tx *bolt.Tx) error {
		launched = nil
		for _, zone := range plan {
			i, err := s.launchLocked(tx, launchSpec{
				region: g.Region, zone: zone, itype: lt.InstanceType, image: lt.Image, net: g.NetworkID,
				groupID: g.ScalingGroupID, ltVersion: g.LaunchTemplateVersion, tags: tags, userData: lt.UserData,
			}, now)
			if err != nil {
				return err
			}
			launched = append(launched, i)
		}
		return nil
	})
	if err != nil {
		if _, ok := err.(*api.Error); !ok {
			return err
		}
		lastErr, launched = err, nil
	}
	for _, i := range launched {
		s.setInstance(i)
	}
	if len(launched) > 0 {
		s.stats.add(0, int64(len(launched)), 0)
		s.triggerKubelet()
	}
	activity := ""
	if lastErr != nil {
		activity = fmt.Sprintf("launched %d of %d instances: %v", len(launched), missing, lastErr)
	}
	return s.setActivityLocked(g, activity)
}

func (s *Server) setActivityLocked(g *group, activity string) error {
	if g.LastActivity == activity {
		return nil
	}
	n := *g
	n.LastActivity = activity
	if err := s.update(func(tx *bolt.Tx) error { return putJSON(tx, bucketGroups, n.ScalingGroupID, &n) }); err != nil {
		return err
	}
	*g = n
	return nil
}
