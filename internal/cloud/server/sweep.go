package server

import (
	"context"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/kubelet"
)

// updateIf runs fn in a write transaction only when cond holds.
func (s *Server) updateIf(cond bool, fn func(tx *bolt.Tx) error) error {
	if !cond {
		return nil
	}
	return s.update(fn)
}

// sweepLoop purges terminated instances past their retention and reconciles scaling
// groups every SweepInterval. Everything it acts on is in the state file, so a restart
// simply resumes.
func (s *Server) sweepLoop(ctx context.Context) {
	t := time.NewTicker(s.opts.SweepInterval)
	defer t.Stop()
	for {
		s.Sweep()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sweep runs one purge and scaling group pass now.
func (s *Server) Sweep() {
	now := s.now()
	if err := s.purgeExpired(now); err != nil {
		s.log.Error(err, "purging terminated instances")
	}
	s.reconcileGroups(now)
}

func (s *Server) triggerKubelet() {
	if s.kubelet != nil {
		s.kubelet.Trigger()
	}
}

// KubeletSnapshot implements kubelet.Source: every visible instance, the catalogue and
// the node faults.
func (s *Server) KubeletSnapshot() kubelet.Snapshot {
	now := s.now()
	snap := kubelet.Snapshot{
		Now:           now,
		InstanceTypes: s.cat.types,
		Images:        s.cat.images,
	}
	s.mu.RLock()
	snap.Instances = make([]api.Instance, 0, len(s.inst))
	for _, i := range s.inst {
		if s.visible(i, now) {
			snap.Instances = append(snap.Instances, i.view(now, false))
		}
	}
	s.mu.RUnlock()
	s.faultMu.Lock()
	for _, f := range s.sortedFaultsLocked() {
		if f.Kind == api.FaultNodeNotReady || f.Kind == api.FaultNodeCondition {
			snap.Faults = append(snap.Faults, *f)
		}
	}
	s.faultMu.Unlock()
	return snap
}
