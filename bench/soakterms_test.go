package main

import (
	"testing"
	"time"

	"github.com/machina-dev/machina/internal/lab"
)

// leaseTerms splits the audit log into terms at each change of the Lease's holder and flags
// every controller write by a process that did not hold the Lease when it was received.
func TestLeaseTerms(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	ev := func(sec int, proc, resource, name string, code int) lab.AuditEvent {
		return lab.AuditEvent{Verb: "patch", Groups: []string{"system:serviceaccounts", replicaGroup + proc}, Resource: resource,
			Namespace: soakLeaseNamespace, Name: name, Code: code, Received: t0.Add(time.Duration(sec) * time.Second)}
	}
	lease := func(sec int, proc string, code int) lab.AuditEvent {
		return ev(sec, proc, "leases", soakLeaseName, code)
	}
	events := []lab.AuditEvent{
		ev(9, "a-1", "machines", "m4", 200), // after a-1's term ended at 8: late
		lease(1, "a-1", 200),
		ev(2, "a-1", "machines", "m1", 200),
		lease(3, "a-1", 200),                // a renewal: the same term
		ev(4, "b-1", "machines", "m2", 200), // b-1 never held the Lease: late
		ev(5, "a-1", "machines", "m3", 200),
		lease(6, "b-1", 409),              // a failed takeover changes nothing
		ev(7, "b-1", "events", "e1", 201), // an Event is not a controller write
		lease(8, "b-1", 200),              // b-1 takes over
		ev(10, "b-1", "machines", "m5", 200),
		ev(11, "a-1", "machines", "m6", 409), // refused: changed nothing
		{Verb: "patch", Groups: []string{"system:masters"}, Resource: "machines", Name: "x", Code: 200, Received: t0.Add(12 * time.Second)},
	}
	terms, late, checked := leaseTerms(events)
	if len(terms) != 2 || terms[0].replica != "a-1" || terms[0].writes != 2 || !terms[0].to.Equal(t0.Add(8*time.Second)) ||
		terms[0].next != "b-1" || terms[1].replica != "b-1" || terms[1].writes != 1 || !terms[1].to.IsZero() {
		t.Fatalf("terms = %+v", terms)
	}
	if len(late) != 2 || late[0].ev.Name != "m2" || !late[0].ended.IsZero() || late[1].ev.Name != "m4" ||
		!late[1].ended.Equal(t0.Add(8*time.Second)) {
		t.Fatalf("late writes = %+v", late)
	}
	if checked != 5 {
		t.Fatalf("checked %d controller writes, want 5", checked)
	}
	if gaps := takeovers(terms, []time.Time{t0.Add(5 * time.Second)}); len(gaps) != 1 || gaps[0] != 3*time.Second {
		t.Fatalf("takeovers = %v", gaps)
	}
}
