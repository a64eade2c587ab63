package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/ec2"
)

// defaultPool is the address pool of instances launched without a network.
var defaultPool = netip.MustParsePrefix("100.64.0.0/10")

const maxTokenLen = 64

// launchSpec is everything needed to create an instance record.
type launchSpec struct {
	token, hash                     string
	region, zone, itype, image, net string
	groupID                         string
	ltVersion                       int
	tags                            map[string]string
	userData                        []byte
	// ec2 and pools are set for launches of the EC2 front (see ec2Addresses).
	ec2   *api.EC2Attributes
	pools []ec2.AddressPool
}

// launchLocked creates an instance in tx. The caller holds s.mu and adds the returned
// record to s.inst once tx committed.
func (s *Server) launchLocked(tx *bolt.Tx, ls launchSpec, now time.Time) (*instance, error) {
	id, err := s.newInstanceID()
	if err != nil {
		return nil, err
	}
	var ip, hostname string
	var ext *api.EC2Attributes
	if ls.ec2 != nil {
		ext, err = ec2Addresses(tx, ls, id)
		if err != nil {
			return nil, err
		}
		ip = ext.NetworkInterfaces[0].PrivateIP
		hostname = api.EC2Hostname(ls.region, id, ip, ext.PrivateDNS.HostnameType)
	} else {
		if ip, err = s.allocIP(tx, ls.net); err != nil {
			return nil, err
		}
		hostname = id + "." + ls.region + ".compute.internal"
	}
	i := &instance{
		ID:           id,
		Region:       ls.region,
		Zone:         ls.zone,
		InstanceType: ls.itype,
		Image:        ls.image,
		Architecture: s.cat.types[ls.itype].Architecture,
		PrivateIP:    ip,
		Hostname:     hostname,
		EC2:          ext,
		NetworkID:    ls.net,
		GroupID:      ls.groupID,
		LTVersion:    ls.ltVersion,
		Token:        ls.token,
		RequestHash:  ls.hash,
		Tags:         copyTags(ls.tags),
		UserData:     ls.userData,
		LaunchTime:   now,
		RunningAt:    now.Add(s.opts.Delays.Pending),
	}
	if ls.groupID != "" {
		i.Health = api.HealthHealthy
	}
	if err := putJSON(tx, bucketInstances, id, i); err != nil {
		return nil, err
	}
	if ls.token != "" {
		if err := putJSON(tx, bucketTokens, ls.token, tokenRecord{InstanceID: id, RequestHash: ls.hash}); err != nil {
			return nil, err
		}
	}
	return i, nil
}

func (s *Server) newInstanceID() (string, error) {
	for {
		var b [9]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		id := "i-" + hex.EncodeToString(b[:])[:17]
		if _, taken := s.inst[id]; !taken {
			return id, nil
		}
	}
}

func randomID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// allocIP hands out the next address of the network's CIDR (or of the default pool).
// Addresses are never reused; the counter is persisted.
func (s *Server) allocIP(tx *bolt.Tx, networkID string) (string, error) {
	pool := defaultPool
	if networkID != "" {
		n := s.nets[networkID]
		p, err := netip.ParsePrefix(n.CIDR)
		if err != nil {
			return "", err
		}
		pool = p
	}
	return allocFrom(tx, "ip/"+networkID, pool, "networkID", fmt.Sprintf("network %q", networkID))
}

// allocFrom hands out the next address of pool under the counter key; field and what
// name the pool in the error of an exhausted one.
func allocFrom(tx *bolt.Tx, counter string, pool netip.Prefix, field, what string) (string, error) {
	key := []byte(counter)
	c := tx.Bucket(bucketCounters)
	var next uint64
	if v := c.Get(key); len(v) == 8 {
		next = binary.BigEndian.Uint64(v)
	}
	size := uint64(1) << (32 - pool.Bits())
	// Skip the network address and three reserved ones, and the broadcast address.
	off := next + 4
	if off >= size-1 {
		return "", api.Errorf(api.CodeInsufficientAddresses, field, "%s (%s) has no free addresses", what, pool)
	}
	base := binary.BigEndian.Uint32(pool.Masked().Addr().AsSlice())
	var ip [4]byte
	binary.BigEndian.PutUint32(ip[:], base+uint32(off))
	var nb [8]byte
	binary.BigEndian.PutUint64(nb[:], next+1)
	if err := c.Put(key, nb[:]); err != nil {
		return "", err
	}
	return netip.AddrFrom4(ip).String(), nil
}

// requestHash fingerprints a request for idempotency checks.
func requestHash(v any) string {
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// visible says whether a terminated instance is still within its retention.
func (s *Server) visible(i *instance, now time.Time) bool {
	return i.TerminatedAt.IsZero() || now.Before(i.TerminatedAt.Add(s.retention))
}

func (s *Server) runInstances(_ context.Context, r *api.RunInstancesRequest) (any, error) {
	if r.ClientToken == "" {
		return nil, api.Errorf(api.CodeMissingParameter, "clientToken", "clientToken is required (an idempotency token, e.g. the Machine's UID)")
	}
	if len(r.ClientToken) > maxTokenLen {
		return nil, api.Errorf(api.CodeInvalidParameterValue, "clientToken", "clientToken is at most %d characters", maxTokenLen)
	}
	if err := s.validateLaunch("", r.Region, r.Zone, r.InstanceType, r.Image, r.UserData, true); err != nil {
		return nil, err
	}
	if err := validateTags("tags", r.Tags); err != nil {
		return nil, err
	}
	hash := requestHash(r)

	s.mu.Lock()
	defer s.mu.Unlock()
	if r.NetworkID != "" {
		n, ok := s.nets[r.NetworkID]
		if !ok {
			return nil, api.Errorf(api.CodeNetworkNotFound, "networkID", "network %q does not exist", r.NetworkID)
		}
		if n.Region != r.Region {
			return nil, api.Errorf(api.CodeInvalidParameterValue, "networkID", "network %q is in region %q, not %q", r.NetworkID, n.Region, r.Region)
		}
	}
	now := s.now()
	if t, ok := s.toks[r.ClientToken]; ok {
		if t.RequestHash != hash {
			return nil, api.Errorf(api.CodeIdempotentMismatch, "clientToken", "clientToken %q was already used with different parameters (instance %s)", r.ClientToken, t.InstanceID)
		}
		inst, err := s.instanceForToken(t)
		if err != nil {
			return nil, err
		}
		return &api.RunInstancesResponse{Instance: inst.view(now, false), Created: false}, nil
	}
	if err := s.capacityFault(r.Zone, r.InstanceType, r.Tags); err != nil {
		s.stats.injected(api.OpRunInstances)
		return nil, err
	}
	var inst *instance
	err := s.update(func(tx *bolt.Tx) error {
		var err error
		inst, err = s.launchLocked(tx, launchSpec{
			token: r.ClientToken, hash: hash, region: r.Region, zone: r.Zone, itype: r.InstanceType,
			image: r.Image, net: r.NetworkID, tags: r.Tags, userData: r.UserData,
		}, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.setInstance(inst)
	s.toks[r.ClientToken] = tokenRecord{InstanceID: inst.ID, RequestHash: hash}
	s.stats.add(1, 0, 0)
	s.triggerKubelet()
	return &api.RunInstancesResponse{Instance: inst.view(now, false), Created: true}, nil
}

// instanceForToken returns the instance a token created, from memory or, once purged,
// from its tombstone. The caller holds s.mu.
func (s *Server) instanceForToken(t tokenRecord) (*instance, error) {
	if i, ok := s.inst[t.InstanceID]; ok {
		return i, nil
	}
	var i instance
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketTombstones).Get([]byte(t.InstanceID))
		if v == nil {
			return fmt.Errorf("token refers to instance %s, which has no record", t.InstanceID)
		}
		return json.Unmarshal(v, &i)
	})
	return &i, err
}

func (s *Server) describeInstances(_ context.Context, r *api.DescribeInstancesRequest) (any, error) {
	for _, st := range r.States {
		if !st.Valid() {
			return nil, api.Errorf(api.CodeInvalidParameterValue, "states", "unknown state %q (pending, running, shutting-down, terminated)", st)
		}
	}
	now := s.now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	var cands []*instance
	if len(r.InstanceIDs) > 0 {
		var missing []string
		for _, id := range r.InstanceIDs {
			i, ok := s.inst[id]
			if !ok || !s.visible(i, now) {
				missing = append(missing, id)
				continue
			}
			cands = append(cands, i)
		}
		if len(missing) > 0 {
			return nil, api.Errorf(api.CodeInstanceNotFound, "instanceIDs", "instance(s) %s do not exist", strings.Join(missing, ", "))
		}
	} else if ids, ok := s.byTag.candidates(r.Tags); ok {
		cands = make([]*instance, 0, len(ids))
		for id := range ids {
			if i := s.inst[id]; i != nil {
				cands = append(cands, i)
			}
		}
	} else {
		cands = make([]*instance, 0, len(s.inst))
		for _, i := range s.inst {
			cands = append(cands, i)
		}
	}
	out := &api.DescribeInstancesResponse{Instances: []api.Instance{}}
	seen := map[string]bool{}
	for _, i := range cands {
		if seen[i.ID] || !s.visible(i, now) {
			continue
		}
		seen[i.ID] = true
		if r.Region != "" && i.Region != r.Region || r.Zone != "" && i.Zone != r.Zone ||
			r.ScalingGroupID != "" && i.GroupID != r.ScalingGroupID || !tagsMatch(i.Tags, r.Tags) {
			continue
		}
		v := i.view(now, r.IncludeUserData)
		if len(r.States) > 0 && !slices.Contains(r.States, v.State) {
			continue
		}
		out.Instances = append(out.Instances, v)
	}
	sortInstances(out.Instances)
	return out, nil
}

func sortInstances(l []api.Instance) {
	sort.Slice(l, func(a, b int) bool {
		if !l[a].LaunchTime.Equal(l[b].LaunchTime) {
			return l[a].LaunchTime.Before(l[b].LaunchTime)
		}
		return l[a].InstanceID < l[b].InstanceID
	})
}

// tagsMatch reports whether have carries every key of want with the same value ("*" is
// any value).
func tagsMatch(have, want map[string]string) bool {
	for k, v := range want {
		hv, ok := have[k]
		if !ok || (v != "*" && hv != v) {
			return false
		}
	}
	return true
}

func copyTags(t map[string]string) map[string]string {
	if len(t) == 0 {
		return nil
	}
	out := make(map[string]string, len(t))
	for k, v := range t {
		out[k] = v
	}
	return out
}

func (s *Server) terminateInstances(_ context.Context, r *api.TerminateInstancesRequest) (any, error) {
	if len(r.InstanceIDs) == 0 {
		return nil, api.Errorf(api.CodeMissingParameter, "instanceIDs", "instanceIDs is required")
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var missing []string
	for _, id := range r.InstanceIDs {
		if i, ok := s.inst[id]; !ok || !s.visible(i, now) {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return nil, api.Errorf(api.CodeInstanceNotFound, "instanceIDs", "instance(s) %s do not exist", strings.Join(missing, ", "))
	}
	changes, err := s.terminateLocked(r.InstanceIDs, api.ReasonUserInitiated, s.opts.Delays.ShuttingDown, now, nil)
	if err != nil {
		return nil, err
	}
	return &api.TerminateInstancesResponse{Instances: changes}, nil
}

// terminateLocked starts the shutdown of the alive instances among ids (others are
// reported unchanged). extra, if not nil, runs in the same transaction, so that related
// changes (a group's capacity, its deletion) commit together with the terminations. The
// caller holds s.mu, has checked the IDs exist, and updates memory for extra's changes.
func (s *Server) terminateLocked(ids []string, reason string, shutdown time.Duration, now time.Time, extra func(tx *bolt.Tx) error) ([]api.InstanceStateChange, error) {
	changes := make([]api.InstanceStateChange, 0, len(ids))
	updated := map[string]instance{}
	for _, id := range ids {
		i := s.inst[id]
		prev, _ := i.stateAt(now)
		if prev == api.StateShuttingDown || prev == api.StateTerminated {
			// Idempotent: shutting-down or terminated instances stay as they are.
			changes = append(changes, api.InstanceStateChange{InstanceID: id, PreviousState: prev, CurrentState: prev})
			continue
		}
		if _, dup := updated[id]; dup {
			continue
		}
		n := *i
		n.ShutdownAt = now
		n.TerminatedAt = now.Add(shutdown)
		if prev == api.StateStopped {
			n.TerminatedAt = now // nothing left to shut down
		}
		n.StateReason = reason
		updated[id] = n
		cur, _ := n.stateAt(now)
		changes = append(changes, api.InstanceStateChange{InstanceID: id, PreviousState: prev, CurrentState: cur})
	}
	if len(updated) == 0 && extra == nil {
		return changes, nil
	}
	err := s.update(func(tx *bolt.Tx) error {
		for id, n := range updated {
			if err := putJSON(tx, bucketInstances, id, &n); err != nil {
				return err
			}
		}
		if extra != nil {
			return extra(tx)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, n := range updated {
		s.setInstance(&n)
	}
	s.stats.add(0, 0, int64(len(updated)))
	s.triggerKubelet()
	return changes, nil
}

func (s *Server) killInstances(_ context.Context, r *api.KillInstancesRequest) (any, error) {
	if len(r.InstanceIDs) == 0 && len(r.Tags) == 0 {
		return nil, api.Errorf(api.CodeMissingParameter, "instanceIDs", "select instances by instanceIDs or tags")
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids, missing []string
	for _, id := range r.InstanceIDs {
		if i, ok := s.inst[id]; !ok || !s.visible(i, now) {
			missing = append(missing, id)
		} else {
			ids = append(ids, id)
		}
	}
	if len(missing) > 0 {
		return nil, api.Errorf(api.CodeInstanceNotFound, "instanceIDs", "instance(s) %s do not exist", strings.Join(missing, ", "))
	}
	if len(r.Tags) > 0 {
		for id, i := range s.inst {
			if st, _ := i.stateAt(now); st.Alive() && tagsMatch(i.Tags, r.Tags) {
				ids = append(ids, id)
			}
		}
	}
	changes, err := s.terminateLocked(ids, api.ReasonInjectedKill, 0, now, nil)
	if err != nil {
		return nil, err
	}
	out := &api.KillInstancesResponse{Instances: []api.InstanceStateChange{}}
	for _, c := range changes {
		if c.PreviousState != c.CurrentState {
			out.Instances = append(out.Instances, c)
		}
	}
	return out, nil
}

// purgeExpired moves terminated instances past their retention to the tombstones bucket,
// where only RunInstances' token lookups find them.
func (s *Server) purgeExpired(now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone []*instance
	for _, i := range s.inst {
		if !s.visible(i, now) {
			gone = append(gone, i)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	err := s.update(func(tx *bolt.Tx) error {
		for _, i := range gone {
			if i.Token != "" {
				t := *i
				t.UserData = nil
				if err := putJSON(tx, bucketTombstones, i.ID, &t); err != nil {
					return err
				}
			}
			if err := deleteKey(tx, bucketInstances, i.ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, i := range gone {
		s.dropInstance(i.ID)
	}
	return nil
}
