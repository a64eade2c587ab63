package server

import (
	"context"
	"sync"
	"time"

	"github.com/machina-dev/machina/internal/cloud/api"
)

// stats are in-memory call counters; they are diagnostics, not state, and start from zero
// at every start of the server.
type stats struct {
	mu         sync.Mutex
	since      time.Time
	ops        map[string]*api.OperationStats
	created    int64
	byGroups   int64
	terminated int64
}

func (st *stats) reset(now time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.since = now
	st.ops = map[string]*api.OperationStats{}
	st.created, st.byGroups, st.terminated = 0, 0, 0
}

func (st *stats) op(name string) *api.OperationStats {
	o := st.ops[name]
	if o == nil {
		o = &api.OperationStats{}
		st.ops[name] = o
	}
	return o
}

func (st *stats) call(name string) {
	st.mu.Lock()
	st.op(name).Calls++
	st.mu.Unlock()
}

func (st *stats) failure(name string, throttled bool) {
	st.mu.Lock()
	o := st.op(name)
	o.Errors++
	if throttled {
		o.Throttled++
	}
	st.mu.Unlock()
}

func (st *stats) injected(name string) {
	st.mu.Lock()
	st.op(name).Injected++
	st.mu.Unlock()
}

func (st *stats) add(created, byGroups, terminated int64) {
	st.mu.Lock()
	st.created += created
	st.byGroups += byGroups
	st.terminated += terminated
	st.mu.Unlock()
}

// Stats returns the counters and the current instance counts by state.
func (s *Server) Stats() api.Stats {
	now := s.now()
	byState := map[api.InstanceState]int{}
	s.mu.RLock()
	for _, i := range s.inst {
		if s.visible(i, now) {
			st, _ := i.stateAt(now)
			byState[st]++
		}
	}
	s.mu.RUnlock()
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	out := api.Stats{
		Since:                     s.stats.since,
		Operations:                map[string]api.OperationStats{},
		InstancesCreated:          s.stats.created,
		InstancesLaunchedByGroups: s.stats.byGroups,
		InstancesTerminated:       s.stats.terminated,
		InstancesByState:          byState,
	}
	for k, v := range s.stats.ops {
		out.Operations[k] = *v
	}
	return out
}

func (s *Server) getStats(_ context.Context, _ *api.GetStatsRequest) (any, error) {
	st := s.Stats()
	return &st, nil
}

func (s *Server) resetStats(_ context.Context, _ *api.ResetStatsRequest) (any, error) {
	s.stats.reset(s.now())
	return &api.ResetStatsResponse{}, nil
}
