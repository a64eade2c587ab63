package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/ec2"
)

// The server is the EC2 front's model: one store, two fronts.
var _ ec2.Model = (*Server)(nil)

// validateAWSNetwork checks the EC2 front's network against the rest of the catalogue.
func validateAWSNetwork(cat *catalogue, n *api.AWSNetwork) error {
	r, ok := cat.regions[n.Region]
	if !ok {
		return fmt.Errorf("region %q is not a region of the catalogue", n.Region)
	}
	if n.AccountID == "" {
		return fmt.Errorf("accountID is required")
	}
	vpc, err := netip.ParsePrefix(n.VPC.CIDR)
	if n.VPC.ID == "" || err != nil || !vpc.Addr().Is4() {
		return fmt.Errorf("vpc needs an id and an IPv4 cidr (got %q, %q)", n.VPC.ID, n.VPC.CIDR)
	}
	if len(n.Subnets) == 0 {
		return fmt.Errorf("subnets: at least one subnet is required")
	}
	var seen []netip.Prefix
	ids := map[string]bool{}
	for i, sn := range n.Subnets {
		p, err := netip.ParsePrefix(sn.CIDR)
		switch {
		case sn.ID == "" || ids[sn.ID]:
			return fmt.Errorf("subnets[%d]: id %q is empty or not unique", i, sn.ID)
		case !slices.Contains(r.Zones, sn.Zone):
			return fmt.Errorf("subnets[%d] (%s): zone %q is not in region %s", i, sn.ID, sn.Zone, n.Region)
		case err != nil || !p.Addr().Is4() || p.Bits() > 28 || p.Bits() < vpc.Bits() || !vpc.Contains(p.Addr()):
			return fmt.Errorf("subnets[%d] (%s): cidr %q must be an IPv4 prefix of at most /28 inside the vpc's %s", i, sn.ID, sn.CIDR, vpc)
		}
		for _, o := range seen {
			if o.Overlaps(p) {
				return fmt.Errorf("subnets[%d] (%s): cidr %s overlaps %s", i, sn.ID, p, o)
			}
		}
		seen = append(seen, p)
		ids[sn.ID] = true
	}
	for i, g := range n.SecurityGroups {
		if g.ID == "" || g.Name == "" || ids[g.ID] {
			return fmt.Errorf("securityGroups[%d]: needs a unique id and a name", i)
		}
		ids[g.ID] = true
	}
	lbs := map[string]string{}
	for i, lb := range n.LoadBalancers {
		if lb.Name == "" || (lb.Type != "classic" && lb.Type != "network") {
			return fmt.Errorf("loadBalancers[%d]: needs a name and the type classic or network", i)
		}
		lbs[lb.Name] = lb.Type
	}
	for i, tg := range n.TargetGroups {
		if tg.Name == "" || lbs[tg.LoadBalancer] != "network" {
			return fmt.Errorf("targetGroups[%d]: needs a name and a network load balancer (got %q)", i, tg.LoadBalancer)
		}
	}
	for i, h := range n.Hosts {
		if _, ok := cat.types[h.InstanceType]; h.ID == "" || !ok || !slices.Contains(r.Zones, h.Zone) {
			return fmt.Errorf("hosts[%d]: needs an id, a zone of %s and a known instance type", i, n.Region)
		}
	}
	return nil
}

// Catalogue returns the merged catalogue (ec2.Model).
func (s *Server) Catalogue() api.Catalogue {
	var c api.Catalogue
	for _, n := range s.cat.regionNames() {
		c.Regions = append(c.Regions, s.cat.regions[n])
	}
	c.InstanceTypes = s.InstanceTypes()
	for _, im := range s.cat.images {
		c.Images = append(c.Images, im)
	}
	slices.SortFunc(c.Images, func(a, b api.Image) int { return strings.Compare(a.ImageID, b.ImageID) })
	c.AWS = s.cat.aws
	return c
}

// ec2Token is the stored token of instance k of an EC2 reservation.
func ec2Token(token string, k int) string {
	sum := sha256.Sum256([]byte(token))
	return fmt.Sprintf("ec2/%s/%d", hex.EncodeToString(sum[:16]), k)
}

// Launch runs an EC2 RunInstances (ec2.Model): all instances in one transaction.
func (s *Server) Launch(_ context.Context, r ec2.LaunchRequest) (ec2.LaunchResult, error) {
	if err := s.validateLaunch("", r.Region, r.Zone, r.InstanceType, r.Image, r.UserData, true); err != nil {
		return ec2.LaunchResult{}, err
	}
	if err := validateTags("tags", r.Tags); err != nil {
		return ec2.LaunchResult{}, err
	}
	if r.Count < 1 || len(r.Pools) != len(r.EC2.NetworkInterfaces) || len(r.Pools) == 0 {
		return ec2.LaunchResult{}, fmt.Errorf("launch: %d instances, %d pools for %d interfaces", r.Count, len(r.Pools), len(r.EC2.NetworkInterfaces))
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.toks[ec2Token(r.Token, 0)]; ok {
		if t.RequestHash != r.Hash {
			return ec2.LaunchResult{}, api.Errorf(api.CodeIdempotentMismatch, "clientToken",
				"client token %q was already used with different parameters (reservation of %s)", r.Token, t.InstanceID)
		}
		var out ec2.LaunchResult
		for k := 0; ; k++ {
			t, ok := s.toks[ec2Token(r.Token, k)]
			if !ok {
				return out, nil
			}
			i, err := s.instanceForToken(t)
			if err != nil {
				return ec2.LaunchResult{}, err
			}
			out.Instances = append(out.Instances, i.view(now, false))
		}
	}
	if err := s.capacityFault(r.Zone, r.InstanceType, r.Tags); err != nil {
		s.stats.injected(api.OpRunInstances)
		return ec2.LaunchResult{}, err
	}
	sum := sha256.Sum256([]byte(r.Token))
	reservation := "r-" + hex.EncodeToString(sum[:])[:17]
	var made []*instance
	err := s.update(func(tx *bolt.Tx) error {
		made = made[:0]
		for k := range r.Count {
			ext := cloneEC2(&r.EC2)
			ext.ReservationID, ext.LaunchIndex = reservation, k
			i, err := s.launchLocked(tx, launchSpec{
				token: ec2Token(r.Token, k), hash: r.Hash, region: r.Region, zone: r.Zone, itype: r.InstanceType,
				image: r.Image, tags: r.Tags, userData: r.UserData, ec2: ext, pools: r.Pools,
			}, now)
			if err != nil {
				return err
			}
			made = append(made, i)
		}
		return nil
	})
	if err != nil {
		return ec2.LaunchResult{}, err
	}
	out := ec2.LaunchResult{Created: true}
	for _, i := range made {
		s.setInstance(i)
		s.toks[i.Token] = tokenRecord{InstanceID: i.ID, RequestHash: r.Hash}
		out.Instances = append(out.Instances, i.view(now, false))
	}
	s.stats.add(int64(len(made)), 0, 0)
	s.triggerKubelet()
	return out, nil
}

// ec2Addresses fills in the per-instance parts of an EC2 launch: interface and volume
// IDs and an address per interface from its pool.
func ec2Addresses(tx *bolt.Tx, ls launchSpec, id string) (*api.EC2Attributes, error) {
	ext := cloneEC2(ls.ec2)
	for k := range ext.NetworkInterfaces {
		p := ls.pools[k]
		ip, err := allocFrom(tx, "ip/ec2/"+p.Key, p.CIDR, "SubnetId", "subnet "+p.Key)
		if err != nil {
			return nil, err
		}
		ext.NetworkInterfaces[k].PrivateIP = ip
		ext.NetworkInterfaces[k].ID = api.DerivedID("eni", id, k)
	}
	for k := range ext.BlockDevices {
		ext.BlockDevices[k].VolumeID = api.DerivedID("vol", id, k)
	}
	if ext.Spot != nil {
		ext.Spot.RequestID = api.DerivedID("sir", id, 0)
	}
	return ext, nil
}

// cloneEC2 deep-copies EC2 attributes.
func cloneEC2(e *api.EC2Attributes) *api.EC2Attributes { return e.Clone() }

// Instances returns the visible instances of region ordered by launch time, only those
// of ids if any are given (ec2.Model).
func (s *Server) Instances(region string, ids ...string) []api.Instance {
	now := s.now()
	s.mu.RLock()
	var out []api.Instance
	add := func(i *instance) {
		if i.Region == region && s.visible(i, now) {
			out = append(out, i.view(now, false))
		}
	}
	if len(ids) > 0 {
		for _, id := range slices.Compact(slices.Sorted(slices.Values(ids))) {
			if i, ok := s.inst[id]; ok {
				add(i)
			}
		}
	} else {
		out = make([]api.Instance, 0, len(s.inst))
		for _, i := range s.inst {
			add(i)
		}
	}
	s.mu.RUnlock()
	sortInstances(out)
	return out
}

// TerminateInstances terminates instances (ec2.Model).
func (s *Server) TerminateInstances(ctx context.Context, ids []string) ([]api.InstanceStateChange, error) {
	out, err := s.terminateInstances(ctx, &api.TerminateInstancesRequest{InstanceIDs: ids})
	if err != nil {
		return nil, err
	}
	return out.(*api.TerminateInstancesResponse).Instances, nil
}

// StopInstances stops pending and running instances (ec2.Model): they are stopping for
// the shutting-down delay, then stopped. Stopped and stopping ones are left as they are.
func (s *Server) StopInstances(_ context.Context, ids []string) ([]api.InstanceStateChange, error) {
	return s.changeStates(ids, func(i *instance, st api.InstanceState, now time.Time) (bool, error) {
		switch st {
		case api.StateStopping, api.StateStopped:
			return false, nil
		case api.StatePending, api.StateRunning:
			i.StopAt, i.StoppedAt, i.StateReason = now, now.Add(s.opts.Delays.ShuttingDown), api.ReasonUserInitiated
			return true, nil
		}
		return false, api.Errorf(api.CodeIncorrectState, "instanceIDs", "instance %s is %s and cannot be stopped", i.ID, st)
	})
}

// StartInstances starts stopped instances (ec2.Model): pending again for the pending
// delay, with a new launch time. Pending and running ones are left as they are.
func (s *Server) StartInstances(_ context.Context, ids []string) ([]api.InstanceStateChange, error) {
	return s.changeStates(ids, func(i *instance, st api.InstanceState, now time.Time) (bool, error) {
		switch st {
		case api.StatePending, api.StateRunning:
			return false, nil
		case api.StateStopped:
			i.StopAt, i.StoppedAt, i.StateReason = time.Time{}, time.Time{}, ""
			i.LaunchTime, i.RunningAt = now, now.Add(s.opts.Delays.Pending)
			return true, nil
		}
		return false, api.Errorf(api.CodeIncorrectState, "instanceIDs", "instance %s is %s and cannot be started", i.ID, st)
	})
}

// changeStates applies fn to copies of the instances and stores the changed ones in one
// transaction; any error changes nothing.
func (s *Server) changeStates(ids []string, fn func(i *instance, st api.InstanceState, now time.Time) (bool, error)) ([]api.InstanceStateChange, error) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkVisible(ids, now); err != nil {
		return nil, err
	}
	changes := make([]api.InstanceStateChange, 0, len(ids))
	updated := map[string]*instance{}
	for _, id := range ids {
		n := *s.inst[id]
		if u, ok := updated[id]; ok {
			n = *u
		}
		prev, _ := n.stateAt(now)
		changed, err := fn(&n, prev, now)
		if err != nil {
			return nil, err
		}
		if changed {
			updated[id] = &n
		}
		cur, _ := n.stateAt(now)
		changes = append(changes, api.InstanceStateChange{InstanceID: id, PreviousState: prev, CurrentState: cur})
	}
	if err := s.store(updated); err != nil {
		return nil, err
	}
	return changes, nil
}

// checkVisible fails with InstanceNotFound naming the IDs that do not exist. The caller
// holds s.mu.
func (s *Server) checkVisible(ids []string, now time.Time) error {
	var missing []string
	for _, id := range ids {
		if i, ok := s.inst[id]; !ok || !s.visible(i, now) {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return api.Errorf(api.CodeInstanceNotFound, "instanceIDs", "instance(s) %s do not exist", strings.Join(missing, ", "))
	}
	return nil
}

// store persists changed instance records and then takes them into memory. The caller
// holds s.mu.
func (s *Server) store(updated map[string]*instance) error {
	if len(updated) == 0 {
		return nil
	}
	err := s.update(func(tx *bolt.Tx) error {
		for id, n := range updated {
			if err := putJSON(tx, bucketInstances, id, n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, n := range updated {
		s.setInstance(n)
	}
	s.triggerKubelet()
	return nil
}

// UpdateInstances changes tags and EC2 attributes (ec2.Model).
func (s *Server) UpdateInstances(_ context.Context, ids []string, fn func(id string, tags map[string]string, ext *api.EC2Attributes) error) error {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkVisible(ids, now); err != nil {
		return err
	}
	updated := map[string]*instance{}
	for _, id := range ids {
		n := *s.inst[id]
		if u, ok := updated[id]; ok {
			n = *u
		}
		tags := copyTags(n.Tags)
		if tags == nil {
			tags = map[string]string{}
		}
		ext := cloneEC2(n.EC2)
		if err := fn(id, tags, ext); err != nil {
			return err
		}
		if err := validateTags("tags", tags); err != nil {
			return err
		}
		n.Tags, n.EC2 = copyTags(tags), ext
		updated[id] = &n
	}
	return s.store(updated)
}

// InjectFaults applies error, latency and throttle faults to a call of the EC2 front.
func (s *Server) InjectFaults(ctx context.Context, op string, ids []string, tags map[string]string) error {
	return s.injectFaults(ctx, op, faultScope{ids: ids, tags: tags})
}

// RecordCall counts a call of the EC2 front in the stats.
func (s *Server) RecordCall(op string, failed, throttled bool) {
	s.stats.call(op)
	if failed {
		s.stats.failure(op, throttled)
	}
}
