package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/machina-dev/machina/internal/lab"
)

// term is one replica process's hold on the leader-election Lease, read from the API server's audit
// log: from its first successful write of the Lease after another's to the next other
// replica's.
type term struct {
	replica   string
	from, to  time.Time // to is zero for the term still running at the end
	next      string    // the replica that took the Lease over
	writes    int
	lastWrite time.Time
}

// lateWrite is a write a replica made after its term ended.
type lateWrite struct {
	replica string
	ev      lab.AuditEvent
	ended   time.Time // when its last term ended ("never held" when zero)
}

// notControllerWrite says whether an audited request is outside what the invariant is about:
// the election itself, events (a record of what was done, sent asynchronously), the
// access reviews every replica makes, and the authority webhook's serving certificate and
// registration, which every replica keeps whether or not it leads.
func notControllerWrite(ev lab.AuditEvent) bool {
	switch ev.Resource {
	case "leases", "events", "selfsubjectreviews", "subjectaccessreviews", "selfsubjectaccessreviews",
		"tokenreviews", "validatingwebhookconfigurations":
		return true
	case "secrets":
		return ev.Namespace == soakLeaseNamespace
	}
	return false
}

// replicaOf names the soak replica process that made a request, e.g. "a-2" ("" for anyone
// else).
func replicaOf(ev lab.AuditEvent) string {
	for _, g := range ev.Groups {
		if name, ok := strings.CutPrefix(g, replicaGroup); ok {
			return name
		}
	}
	return ""
}

// leaseTerms walks the audit log in the order the API server received the requests and
// returns each term and every successful controller write of a replica that did not hold
// the Lease when the API server received it.
func leaseTerms(events []lab.AuditEvent) ([]term, []lateWrite, int) {
	slices.SortStableFunc(events, func(a, b lab.AuditEvent) int { return a.Received.Compare(b.Received) })
	var terms []term
	var late []lateWrite
	ended := map[string]time.Time{}
	checked := 0
	for _, ev := range events {
		r := replicaOf(ev)
		if r == "" || ev.Code < 200 || ev.Code > 299 {
			continue
		}
		cur := len(terms) - 1
		if ev.Resource == "leases" && ev.Namespace == soakLeaseNamespace && ev.Name == soakLeaseName {
			if cur < 0 || terms[cur].replica != r {
				if cur >= 0 {
					terms[cur].to, terms[cur].next = ev.Received, r
					ended[terms[cur].replica] = ev.Received
				}
				terms = append(terms, term{replica: r, from: ev.Received})
			}
			continue
		}
		if notControllerWrite(ev) {
			continue
		}
		checked++
		if cur >= 0 && terms[cur].replica == r {
			terms[cur].writes++
			terms[cur].lastWrite = ev.Received
			continue
		}
		// Written by a replica that is not the Lease's holder: after its own term ended
		// (ended[r]), or without ever holding it.
		late = append(late, lateWrite{replica: r, ev: ev, ended: ended[r]})
	}
	return terms, late, checked
}

// checkTerms reads the audit log at the end of a run with several replicas: every write a
// replica made after losing the Lease is a violation; each term's last write is reported.
func (s *soak) checkTerms() error {
	if len(s.replicas) < 2 {
		return nil
	}
	events, err := lab.ReadAudit(s.e.lab.AuditLogPath())
	if err != nil {
		return fmt.Errorf("reading the audit log: %w", err)
	}
	terms, late, checked := leaseTerms(events)
	s.rep.checked(invLease, checked)
	s.rep.count("leadership terms", len(terms))
	start := s.rep.start
	for _, t := range terms {
		line := fmt.Sprintf("term of manager %s from %s: %d writes", t.replica, t.from.Sub(start).Round(100*time.Millisecond), t.writes)
		if !t.lastWrite.IsZero() {
			line += fmt.Sprintf(", the last at %s", t.lastWrite.Sub(start).Round(100*time.Millisecond))
		}
		if !t.to.IsZero() {
			last := t.from
			if t.lastWrite.After(last) {
				last = t.lastWrite
			}
			line += fmt.Sprintf("; ended at %s when manager %s took the Lease (%s after its last write)",
				t.to.Sub(start).Round(100*time.Millisecond), t.next, t.to.Sub(last).Round(100*time.Millisecond))
		}
		s.rep.lines = append(s.rep.lines, line)
	}
	if gaps := takeovers(terms, s.leaderLost); len(gaps) > 0 {
		slices.Sort(gaps)
		s.rep.lines = append(s.rep.lines, fmt.Sprintf("a new term began %s–%s (median %s) after the leader was SIGKILLed or cut off (%d times)",
			gaps[0].Round(100*time.Millisecond), gaps[len(gaps)-1].Round(100*time.Millisecond), gaps[len(gaps)/2].Round(100*time.Millisecond), len(gaps)))
	}
	for _, l := range late {
		held := "never having held the Lease"
		if !l.ended.IsZero() {
			held = fmt.Sprintf("%s after its term ended", l.ev.Received.Sub(l.ended).Round(time.Millisecond))
		}
		s.rep.violate(invLease, "manager %s: %s %s %s/%s at %s, %s", l.replica, l.ev.Verb, resourceName(l.ev),
			l.ev.Namespace, l.ev.Name, l.ev.Received.Sub(start).Round(100*time.Millisecond), held)
	}
	return nil
}

// takeovers is, for each time a leader was lost, how long until the next term began.
func takeovers(terms []term, lost []time.Time) []time.Duration {
	var out []time.Duration
	for _, at := range lost {
		for _, t := range terms {
			if t.from.After(at) {
				out = append(out, t.from.Sub(at))
				break
			}
		}
	}
	return out
}

func resourceName(ev lab.AuditEvent) string {
	if ev.Subresource != "" {
		return ev.Resource + "/" + ev.Subresource
	}
	return ev.Resource
}
