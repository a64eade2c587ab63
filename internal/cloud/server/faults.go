package server

import (
	"context"
	"net/http"
	"slices"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/ec2"
)

// validateFault checks a fault and fills in defaults.
func validateFault(cat *catalogue, f *api.Fault) *api.Error {
	if f.Rate < 0 || f.Rate > 1 {
		return api.Errorf(api.CodeInvalidParameterValue, "fault.rate", "rate must be between 0 and 1, got %v", f.Rate)
	}
	if f.Count < 0 {
		return api.Errorf(api.CodeInvalidParameterValue, "fault.count", "count must not be negative")
	}
	if err := validateTags("fault.tags", f.Tags); err != nil {
		return err
	}
	if f.Operation != "" {
		if o, ok := operations[f.Operation]; (!ok || !o.injectable) && !ec2.IsAction(f.Operation) {
			return api.Errorf(api.CodeInvalidParameterValue, "fault.operation", "operation %q does not exist or cannot be faulted", f.Operation)
		}
	}
	switch f.Kind {
	case api.FaultError:
		if f.StatusCode == 0 {
			f.StatusCode = http.StatusInternalServerError
		}
		if f.StatusCode != http.StatusInternalServerError && f.StatusCode != http.StatusServiceUnavailable {
			return api.Errorf(api.CodeInvalidParameterValue, "fault.statusCode", "statusCode must be 500 or 503")
		}
	case api.FaultLatency:
		if f.LatencyMillis <= 0 || f.LatencyMillis > 600_000 {
			return api.Errorf(api.CodeInvalidParameterValue, "fault.latencyMillis", "latencyMillis must be between 1 and 600000")
		}
	case api.FaultThrottle:
		if f.RetryAfterSeconds == 0 {
			f.RetryAfterSeconds = 1
		}
		if f.RetryAfterSeconds < 0 || f.RetryAfterSeconds > 3600 {
			return api.Errorf(api.CodeInvalidParameterValue, "fault.retryAfterSeconds", "retryAfterSeconds must be between 1 and 3600")
		}
	case api.FaultCapacity:
		if f.Zone == "" && f.InstanceType == "" {
			return api.Errorf(api.CodeMissingParameter, "fault.zone", "a capacity fault needs a zone and/or an instanceType")
		}
		if _, ok := cat.zones[f.Zone]; f.Zone != "" && !ok {
			return api.Errorf(api.CodeInvalidZone, "fault.zone", "unknown zone %q", f.Zone)
		}
		if _, ok := cat.types[f.InstanceType]; f.InstanceType != "" && !ok {
			return api.Errorf(api.CodeInvalidInstanceType, "fault.instanceType", "unknown instance type %q", f.InstanceType)
		}
	case api.FaultNodeNotReady, api.FaultNodeCondition:
		if len(f.InstanceIDs) == 0 && len(f.Tags) == 0 {
			return api.Errorf(api.CodeMissingParameter, "fault.instanceIDs", "a node fault needs instanceIDs or tags")
		}
		if f.Kind == api.FaultNodeCondition {
			if f.ConditionType == "" {
				return api.Errorf(api.CodeMissingParameter, "fault.conditionType", "conditionType is required")
			}
			if f.ConditionStatus == "" {
				f.ConditionStatus = "True"
			}
			if f.ConditionStatus != "True" && f.ConditionStatus != "False" && f.ConditionStatus != "Unknown" {
				return api.Errorf(api.CodeInvalidParameterValue, "fault.conditionStatus", "conditionStatus must be True, False or Unknown")
			}
		}
	case "":
		return api.Errorf(api.CodeMissingParameter, "fault.kind", "kind is required")
	default:
		return api.Errorf(api.CodeInvalidParameterValue, "fault.kind", "unknown fault kind %q (error, latency, throttle, capacity, node-not-ready, node-condition)", f.Kind)
	}
	return nil
}

func (s *Server) createFaultOp(_ context.Context, r *api.CreateFaultRequest) (any, error) {
	f, err := s.createFault(r.Fault, randomID("fault-"))
	if err != nil {
		return nil, err
	}
	return &api.CreateFaultResponse{Fault: f}, nil
}

// createFault validates, stores (under id, replacing a fault with that ID) and activates
// a fault.
func (s *Server) createFault(f api.Fault, id string) (api.Fault, error) {
	if err := validateFault(s.cat, &f); err != nil {
		return api.Fault{}, err
	}
	f.FaultID = id
	f.Fired = 0
	f.CreatedAt = s.now()
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	if err := s.update(func(tx *bolt.Tx) error { return putJSON(tx, bucketFaults, f.FaultID, &f) }); err != nil {
		return api.Fault{}, err
	}
	s.faults[f.FaultID] = &f
	s.triggerKubelet()
	return f, nil
}

func (s *Server) describeFaults(_ context.Context, _ *api.DescribeFaultsRequest) (any, error) {
	return &api.DescribeFaultsResponse{Faults: s.Faults()}, nil
}

// Faults lists the active faults ordered by creation.
func (s *Server) Faults() []api.Fault {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	out := make([]api.Fault, 0, len(s.faults))
	for _, f := range s.faults {
		out = append(out, *f)
	}
	sort.Slice(out, func(a, b int) bool {
		if !out[a].CreatedAt.Equal(out[b].CreatedAt) {
			return out[a].CreatedAt.Before(out[b].CreatedAt)
		}
		return out[a].FaultID < out[b].FaultID
	})
	return out
}

func (s *Server) deleteFaults(_ context.Context, r *api.DeleteFaultsRequest) (any, error) {
	if !r.All && len(r.FaultIDs) == 0 {
		return nil, api.Errorf(api.CodeMissingParameter, "faultIDs", "name faultIDs or set all")
	}
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	var ids []string
	for id := range s.faults {
		if r.All || slices.Contains(r.FaultIDs, id) {
			ids = append(ids, id)
		}
	}
	err := s.update(func(tx *bolt.Tx) error {
		for _, id := range ids {
			if err := deleteKey(tx, bucketFaults, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		delete(s.faults, id)
	}
	s.triggerKubelet()
	return &api.DeleteFaultsResponse{Deleted: len(ids)}, nil
}

// inScope reports whether a fault applies to a call about ids/tags. instTags looks up
// the tags of an instance ID.
func inScope(f *api.Fault, sc faultScope, instTags func(id string) map[string]string) bool {
	if len(f.InstanceIDs) == 0 && len(f.Tags) == 0 {
		return true
	}
	for _, id := range sc.ids {
		if slices.Contains(f.InstanceIDs, id) {
			return true
		}
	}
	if len(f.Tags) == 0 {
		return false
	}
	if len(sc.tags) > 0 && tagsMatch(sc.tags, f.Tags) {
		return true
	}
	for _, id := range sc.ids {
		if t := instTags(id); t != nil && tagsMatch(t, f.Tags) {
			return true
		}
	}
	return false
}

// fireLocked decides (by rate) whether f fires, counts it and removes it once its Count
// is used up. The caller holds s.faultMu.
func (s *Server) fireLocked(f *api.Fault) bool {
	if f.Rate > 0 && f.Rate < 1 && s.rng.Float64() >= f.Rate {
		return false
	}
	f.Fired++
	err := s.update(func(tx *bolt.Tx) error {
		if f.Count > 0 && f.Fired >= f.Count {
			return deleteKey(tx, bucketFaults, f.FaultID)
		}
		return putJSON(tx, bucketFaults, f.FaultID, f)
	})
	if err != nil {
		s.log.Error(err, "persisting fault", "fault", f.FaultID)
	}
	if f.Count > 0 && f.Fired >= f.Count {
		delete(s.faults, f.FaultID)
	}
	return true
}

// injectFaults applies latency, throttle and error faults to a call of op.
func (s *Server) injectFaults(ctx context.Context, op string, sc faultScope) error {
	// Look the instances' tags up before taking faultMu (lock order: s.mu, then faultMu).
	tagsByID := map[string]map[string]string{}
	if len(sc.ids) > 0 {
		s.mu.RLock()
		for _, id := range sc.ids {
			if i, ok := s.inst[id]; ok {
				tagsByID[id] = i.Tags
			}
		}
		s.mu.RUnlock()
	}
	instTags := func(id string) map[string]string { return tagsByID[id] }
	var delay time.Duration
	var fail *api.Error
	s.faultMu.Lock()
	for _, f := range s.sortedFaultsLocked() {
		if f.Operation != "" && f.Operation != op {
			continue
		}
		switch f.Kind {
		case api.FaultLatency, api.FaultThrottle, api.FaultError:
		default:
			continue
		}
		if fail != nil && f.Kind != api.FaultLatency {
			continue
		}
		if !inScope(f, sc, instTags) || !s.fireLocked(f) {
			continue
		}
		switch f.Kind {
		case api.FaultLatency:
			delay += time.Duration(f.LatencyMillis) * time.Millisecond
		case api.FaultThrottle:
			fail = api.Errorf(api.CodeThrottling, "", "request rate exceeded (injected fault %s)", f.FaultID)
			fail.RetryAfter = time.Duration(f.RetryAfterSeconds) * time.Second
		case api.FaultError:
			code := api.CodeInternalError
			if f.StatusCode == http.StatusServiceUnavailable {
				code = api.CodeServiceUnavailable
			}
			fail = api.Errorf(code, "", "injected fault %s", f.FaultID)
		}
	}
	s.faultMu.Unlock()
	if delay > 0 {
		s.stats.injected(op)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	if fail != nil {
		s.stats.injected(op)
		return fail
	}
	return nil
}

func (s *Server) sortedFaultsLocked() []*api.Fault {
	out := make([]*api.Fault, 0, len(s.faults))
	for _, f := range s.faults {
		out = append(out, f)
	}
	sort.Slice(out, func(a, b int) bool {
		if !out[a].CreatedAt.Equal(out[b].CreatedAt) {
			return out[a].CreatedAt.Before(out[b].CreatedAt)
		}
		return out[a].FaultID < out[b].FaultID
	})
	return out
}

// capacityFault returns InsufficientInstanceCapacity if a capacity fault covers a launch
// of itype in zone with tags.
func (s *Server) capacityFault(zone, itype string, tags map[string]string) *api.Error {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	for _, f := range s.sortedFaultsLocked() {
		if f.Kind != api.FaultCapacity || (f.Zone != "" && f.Zone != zone) || (f.InstanceType != "" && f.InstanceType != itype) {
			continue
		}
		if len(f.Tags) > 0 && !tagsMatch(tags, f.Tags) {
			continue
		}
		if !s.fireLocked(f) {
			continue
		}
		field := "zone"
		if f.Zone == "" {
			field = "instanceType"
		}
		return api.Errorf(api.CodeInsufficientCapacity, field, "no capacity for instance type %s in zone %s (injected fault %s)", itype, zone, f.FaultID)
	}
	return nil
}
