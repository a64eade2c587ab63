package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/machina-dev/machina/internal/cloud/api"
)

func (s *Server) createNetwork(_ context.Context, r *api.CreateNetworkRequest) (any, error) {
	if r.ClientToken == "" {
		return nil, api.Errorf(api.CodeMissingParameter, "clientToken", "clientToken is required")
	}
	if len(r.ClientToken) > maxTokenLen {
		return nil, api.Errorf(api.CodeInvalidParameterValue, "clientToken", "clientToken is at most %d characters", maxTokenLen)
	}
	if r.Region == "" {
		return nil, api.Errorf(api.CodeMissingParameter, "region", "region is required")
	}
	if _, ok := s.cat.regions[r.Region]; !ok {
		return nil, api.Errorf(api.CodeInvalidRegion, "region", "unknown region %q (known: %v)", r.Region, s.cat.regionNames())
	}
	if r.CIDR != "" {
		p, err := netip.ParsePrefix(r.CIDR)
		if err != nil || !p.Addr().Is4() || p.Bits() < 8 || p.Bits() > 28 {
			return nil, api.Errorf(api.CodeInvalidParameterValue, "cidr", "cidr %q must be an IPv4 prefix from /8 to /28", r.CIDR)
		}
	}
	if err := validateTags("tags", r.Tags); err != nil {
		return nil, err
	}
	hash := requestHash(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.ntoks[r.ClientToken]; ok {
		n := s.nets[id]
		if n.RequestHash != hash {
			return nil, api.Errorf(api.CodeIdempotentMismatch, "clientToken", "clientToken %q was already used with different parameters (network %s)", r.ClientToken, id)
		}
		return &api.CreateNetworkResponse{Network: n.Network, Created: false}, nil
	}
	n := &network{Network: api.Network{
		NetworkID: randomID("net-"), Region: r.Region, CIDR: r.CIDR, Tags: copyTags(r.Tags),
		CreatedAt: s.now(), ClientToken: r.ClientToken,
	}, RequestHash: hash}
	err := s.update(func(tx *bolt.Tx) error {
		if n.CIDR == "" {
			// A fresh 10.N.0.0/16 per network, N counting up (and wrapping) across the cloud.
			c := tx.Bucket(bucketCounters)
			var seq uint64
			if v := c.Get([]byte("netseq")); len(v) == 8 {
				seq = binary.BigEndian.Uint64(v)
			}
			n.CIDR = fmt.Sprintf("10.%d.0.0/16", seq%256)
			var b [8]byte
			binary.BigEndian.PutUint64(b[:], seq+1)
			if err := c.Put([]byte("netseq"), b[:]); err != nil {
				return err
			}
		}
		return putJSON(tx, bucketNetworks, n.NetworkID, n)
	})
	if err != nil {
		return nil, err
	}
	s.nets[n.NetworkID] = n
	s.ntoks[n.ClientToken] = n.NetworkID
	return &api.CreateNetworkResponse{Network: n.Network, Created: true}, nil
}

func (s *Server) deleteNetwork(_ context.Context, r *api.DeleteNetworkRequest) (any, error) {
	if r.NetworkID == "" {
		return nil, api.Errorf(api.CodeMissingParameter, "networkID", "networkID is required")
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.nets[r.NetworkID]
	if !ok {
		return &api.DeleteNetworkResponse{}, nil
	}
	var users []string
	for _, i := range s.inst {
		if st, _ := i.stateAt(now); i.NetworkID == n.NetworkID && st != api.StateTerminated {
			users = append(users, i.ID)
		}
	}
	for _, g := range s.grps {
		if g.NetworkID == n.NetworkID {
			users = append(users, g.ScalingGroupID)
		}
	}
	if len(users) > 0 {
		sort.Strings(users)
		if len(users) > 5 {
			users = append(users[:5], "...")
		}
		return nil, api.Errorf(api.CodeDependencyViolation, "networkID", "network %s is still used by %s", n.NetworkID, strings.Join(users, ", "))
	}
	err := s.update(func(tx *bolt.Tx) error { return deleteKey(tx, bucketNetworks, n.NetworkID) })
	if err != nil {
		return nil, err
	}
	delete(s.nets, n.NetworkID)
	delete(s.ntoks, n.ClientToken)
	return &api.DeleteNetworkResponse{}, nil
}

func (s *Server) describeNetworks(_ context.Context, r *api.DescribeNetworksRequest) (any, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := &api.DescribeNetworksResponse{Networks: []api.Network{}}
	if len(r.NetworkIDs) > 0 {
		for _, id := range r.NetworkIDs {
			n, ok := s.nets[id]
			if !ok {
				return nil, api.Errorf(api.CodeNetworkNotFound, "networkIDs", "network %q does not exist", id)
			}
			if tagsMatch(n.Tags, r.Tags) {
				out.Networks = append(out.Networks, n.Network)
			}
		}
		return out, nil
	}
	for _, n := range s.nets {
		if tagsMatch(n.Tags, r.Tags) {
			out.Networks = append(out.Networks, n.Network)
		}
	}
	sort.Slice(out.Networks, func(a, b int) bool { return out.Networks[a].NetworkID < out.Networks[b].NetworkID })
	return out, nil
}
