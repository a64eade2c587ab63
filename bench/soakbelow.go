package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/lab"
)

// The soak's fault kinds (-faults).
const (
	// faultCloud: the cloud's API errs, throttles and stalls; running instances are killed.
	faultCloud = "cloud"
	// faultManager: a manager replica is SIGKILLed and restarted.
	faultManager = "manager"
	// faultAPIServer: the kube-apiserver is SIGKILLed and restarted on its port; every watch
	// breaks and resumes or relists (410 Gone) against a fresh watch cache.
	faultAPIServer = "apiserver"
	// faultEtcd: etcd is SIGKILLed and restarted on its data.
	faultEtcd = "etcd"
	// faultCompaction: etcd's history is compacted to its current revision and every
	// replica's connections are dropped, so their informers re-watch from before it.
	faultCompaction = "compaction"
	// faultPartition: a replica is cut off from the API server for 10–60 s (connections
	// dropped, or held without a byte forwarded), its process left running.
	faultPartition = "partition"
	// faultLeader: a handover is started and, while it is under way, the leader is SIGKILLed
	// or cut off past its Lease, so another replica finishes it.
	faultLeader = "leader"
)

// faultKinds are every kind, in the order -faults all lists them; belowKinds are those the
// soak injects in turn below (or beside) the manager.
var (
	faultKinds = []string{faultCloud, faultManager, faultAPIServer, faultEtcd, faultCompaction, faultPartition, faultLeader}
	belowKinds = []string{faultAPIServer, faultEtcd, faultCompaction, faultPartition, faultLeader}
)

// parseFaults reads -faults: "all" or a comma-separated list of kinds.
func parseFaults(v string, replicas int) (map[string]bool, error) {
	out := map[string]bool{}
	for _, k := range strings.Split(v, ",") {
		k = strings.TrimSpace(k)
		switch {
		case k == "all":
			for _, k := range faultKinds {
				out[k] = true
			}
		case slices.Contains(faultKinds, k):
			out[k] = true
		case k != "":
			return nil, fmt.Errorf("-faults: unknown kind %q (kinds: all, %s)", k, strings.Join(faultKinds, ", "))
		}
	}
	if out[faultLeader] && replicas < 2 {
		return nil, fmt.Errorf("-faults %s needs -replicas 2 or more: with one manager there is no other to take over", faultLeader)
	}
	return out, nil
}

// below schedules the faults below the manager: the enabled kinds in turn (reshuffled each
// round, so each is injected as often as the others), one every BelowEvery ± 40 %, at most
// one cut-off at a time.
type below struct {
	kinds  []string
	round  []string
	rounds int // rounds begun
	next   time.Time
	cuts   []cut
}

// firstRoundDone says whether every enabled kind has been injected at least once.
func (b *below) firstRoundDone() bool {
	return len(b.kinds) == 0 || b.rounds > 1 || (b.rounds == 1 && len(b.round) == 0)
}

// cut is a replica cut off from the API server until healAt.
type cut struct {
	r      *replica
	healAt time.Time
}

func newBelow(enabled map[string]bool, start time.Time) *below {
	b := &below{next: start.Add(10 * time.Second)}
	for _, k := range belowKinds {
		if enabled[k] {
			b.kinds = append(b.kinds, k)
		}
	}
	return b
}

// step heals the cut-offs that are due and injects the next fault when one is due.
func (s *soak) belowStep(ctx context.Context, now time.Time) error {
	b := s.below
	s.healDue(now, false)
	if len(b.kinds) == 0 || now.Before(b.next) {
		return nil
	}
	if len(b.round) == 0 {
		b.rounds++
		b.round = slices.Clone(b.kinds)
		s.rnd.Shuffle(len(b.round), func(i, j int) { b.round[i], b.round[j] = b.round[j], b.round[i] })
	}
	kind := b.round[0]
	if (kind == faultPartition || kind == faultLeader) && len(b.cuts) > 0 {
		return nil // one cut-off at a time: wait for the heal
	}
	b.round = b.round[1:]
	every := s.o.BelowEvery
	b.next = now.Add(every*6/10 + time.Duration(s.rnd.Int64N(int64(every*8/10)+1)))
	return s.inject(ctx, kind)
}

func (s *soak) inject(ctx context.Context, kind string) error {
	start := time.Now()
	var err error
	switch kind {
	case faultAPIServer:
		err = s.e.lab.RestartAPIServer(ctx)
	case faultEtcd:
		err = s.e.lab.RestartEtcd(ctx)
	case faultCompaction:
		err = s.compact(ctx)
	case faultPartition:
		s.cutOff(s.replicas[s.rnd.IntN(len(s.replicas))], "", 10*time.Second)
	case faultLeader:
		err = s.leaderFault(ctx)
	}
	if err != nil {
		return fmt.Errorf("injecting %s fault: %w", kind, err)
	}
	s.rep.count(kind, 1)
	if kind != faultPartition && kind != faultLeader {
		s.check.endOutage(time.Now())
	}
	if kind == faultAPIServer || kind == faultEtcd {
		s.check.note("%s SIGKILLed and back in %s", kind, time.Since(start).Round(100*time.Millisecond))
	}
	return nil
}

// compact compacts etcd and drops every replica's connections for a moment, so their
// informers re-watch from a resourceVersion older than the compaction.
func (s *soak) compact(ctx context.Context) error {
	rev, err := s.e.lab.CompactEtcd(ctx)
	if err != nil {
		return err
	}
	for _, r := range s.replicas {
		r.proxy.Cut(lab.Drop)
	}
	time.Sleep(500 * time.Millisecond)
	for _, r := range s.replicas {
		r.proxy.Heal()
	}
	s.check.note("etcd compacted at revision %d; every manager's connections dropped", rev)
	return nil
}

// cutOff cuts r off from the API server for lo to CutMax (at least lo), dropping its
// connections or holding them without forwarding a byte (chosen at random).
func (s *soak) cutOff(r *replica, why string, lo time.Duration) {
	mode, name := lab.Drop, "dropped"
	if s.rnd.IntN(2) == 0 {
		mode, name = lab.Stall, "stalled"
	}
	d := lo + time.Duration(s.rnd.Int64N(int64(max(s.o.CutMax-lo, 0))+1))
	r.proxy.Cut(mode)
	s.below.cuts = append(s.below.cuts, cut{r: r, healAt: time.Now().Add(d)})
	s.check.note("manager %s%s cut off from the API server for %s (connections %s)", r.process(), why, d.Round(time.Second), name)
}

// healDue heals the cut-offs that are due (all of them with all).
func (s *soak) healDue(now time.Time, all bool) {
	b := s.below
	b.cuts = slices.DeleteFunc(b.cuts, func(c cut) bool {
		if !all && now.Before(c.healAt) {
			return false
		}
		c.r.proxy.Heal()
		s.check.endOutage(time.Now().Add(leaderGap))
		s.check.note("manager %s reconnected to the API server", c.r.name)
		return true
	})
}

// leaderGap bounds how long the replicas are without a leader after the leader dies or is
// cut off: the Lease's duration and a retry period (docs/install.md), with slack.
const leaderGap = 25 * time.Second

// leaderCut is the shortest cut-off of a leader: well past its Lease, so another replica
// takes over before it is back.
const leaderCut = 30 * time.Second

// leaderFault starts a handover and, once it is under way (its MachineSet's
// status.authoritativeAPI Migrating), SIGKILLs the leader or cuts it off long enough to
// lose its Lease, so the other replica must finish the handover.
func (s *soak) leaderFault(ctx context.Context) error {
	lead := s.awaitLeader(time.Minute)
	if lead == nil {
		s.check.note("leader fault: no replica has led for a minute; skipped")
		s.rep.count("leader faults skipped (no leader)", 1)
		return nil
	}
	midHandover := false
	for range 5 {
		if midHandover = s.startHandover(ctx); midHandover {
			break
		}
	}
	if midHandover {
		s.rep.count("leader faults mid-handover", 1)
	}
	s.leaderLost = append(s.leaderLost, time.Now())
	if s.rnd.IntN(2) == 0 {
		s.check.note("leader %s SIGKILLed (handover under way: %v)", lead.process(), midHandover)
		s.check.endOutage(time.Now().Add(leaderGap))
		return lead.kill()
	}
	// Past the Lease (20 s by default), so leadership moves.
	s.cutOff(lead, fmt.Sprintf(" (the leader; handover under way: %v)", midHandover), leaderCut)
	return nil
}

// awaitLeader returns the replica that leads, waiting up to d for one: after a leader was
// lost (an earlier fault, a restart) the next takes the Lease only once it has expired.
func (s *soak) awaitLeader(d time.Duration) *replica {
	deadline := time.Now().Add(d)
	for {
		if lead := s.leader(); lead != nil || time.Now().After(deadline) {
			return lead
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// startHandover flips a random MachineSet's authority and reports whether its handover is
// still under way a random 0–0.5 s later, when the leader fault comes: requested and not
// finished (status Migrating, or still the old authority). Caught at random moments, the
// faults land at every stage of a handover, its first step included.
func (s *soak) startHandover(ctx context.Context) bool {
	ms := &machinev1beta1.MachineSet{}
	ms.Namespace, ms.Name = mapiNS, s.pick(s.sets)
	s.target = ""
	_, err := s.flipSpec(ctx, ms)
	s.rep.op("migrate-machineset", err)
	if err != nil {
		s.check.note("leader fault: op migrate-machineset %s: refused: %v", s.target, err)
		return false
	}
	s.check.note("leader fault: op migrate-machineset %s", s.target)
	// A MachineSet's handover can finish in a few hundred milliseconds (seed 3 once found
	// none of five under way after up to 500 ms): the fault lands within 150 ms of the request.
	time.Sleep(time.Duration(s.rnd.IntN(150)) * time.Millisecond)
	got := &machinev1beta1.MachineSet{}
	if err := s.e.client.Get(ctx, client.ObjectKeyFromObject(ms), got); err != nil {
		return false
	}
	return got.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityMigrating ||
		got.Spec.AuthoritativeAPI != got.Status.AuthoritativeAPI
}
