package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// The soak's invariants, in the order they are reported.
const (
	invInstances   = "one instance per Machine pair (no duplicate, no leak, none missing)"
	invActive      = "one active side per pair (never both; the authoritative one at the end)"
	invTerminating = "nothing Terminating longer than 60s (180s under the upstream controllers)"
	invPending     = "no migration pending longer than 120s after faults stop"
	invSynced      = "every pair ends Synchronized with matching specs"
	invLease       = "no write by a replica after it lost the leader-election Lease"
)

var invariants = []string{invInstances, invActive, invTerminating, invPending, invSynced, invLease}

// violation is one broken invariant, with what is needed to debug it.
type violation struct {
	At     time.Duration
	Detail string
}

// soakReport collects the counts of a run; the operations loop and the checker both write it.
type soakReport struct {
	mu              sync.Mutex
	start           time.Time
	ops, refused    map[string]int
	refusedSample   map[string]string
	kills           int
	faultSets       int
	instancesKilled int
	faultsInjected  int64
	observations    int
	// counts are the faults below the manager and what they caused, by name.
	counts map[string]int
	// lines are printed under the counts (the leadership terms).
	lines      []string
	checks     map[string]int
	violations map[string][]violation
}

func newSoakReport() *soakReport {
	return &soakReport{start: time.Now(), ops: map[string]int{}, refused: map[string]int{}, refusedSample: map[string]string{},
		checks: map[string]int{}, violations: map[string][]violation{}, counts: map[string]int{}}
}

func (r *soakReport) since() time.Duration { return time.Since(r.start).Round(100 * time.Millisecond) }

// op counts an operation and whether the apiserver refused it.
func (r *soakReport) op(name string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops[name]++
	if err != nil {
		r.refused[name]++
		r.refusedSample[name] = err.Error()
	}
}

// count adds n to a named count of the report.
func (r *soakReport) count(name string, n int) {
	r.mu.Lock()
	r.counts[name] += n
	r.mu.Unlock()
}

// checked counts n checks of an invariant.
func (r *soakReport) checked(inv string, n int) {
	r.mu.Lock()
	r.checks[inv] += n
	r.mu.Unlock()
}

// violate records a violation and prints it at once, so a long run can be followed.
func (r *soakReport) violate(inv, format string, args ...any) {
	v := violation{At: r.since(), Detail: fmt.Sprintf(format, args...)}
	r.mu.Lock()
	r.violations[inv] = append(r.violations[inv], v)
	r.mu.Unlock()
	fmt.Fprintf(os.Stderr, "soak %8s VIOLATION %s: %s\n", v.At, inv, v.Detail)
}

func (r *soakReport) failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.violations) > 0
}

func (r *soakReport) print(w io.Writer, o soakOptions) {
	o = o.withDefaults()
	r.mu.Lock()
	defer r.mu.Unlock()
	total, refused := 0, 0
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(r.ops)) {
		total += r.ops[name]
		refused += r.refused[name]
		parts = append(parts, fmt.Sprintf("%s %d/%d refused", name, r.ops[name], r.refused[name]))
	}
	where := "the simulated platform under machina's controllers"
	if o.Upstream {
		where = "the AWS lab under the upstream controllers (-upstream)"
	}
	fmt.Fprintf(w, "\nsoak seed %d: %s of operations, %s in all, up to %d Machines, in %s\n", o.Seed, o.Duration, r.since(), o.Machines, where)
	fmt.Fprintf(w, "operations: %d (%d refused by the apiserver): %s\n", total, refused, strings.Join(parts, ", "))
	fmt.Fprintf(w, "manager SIGKILLs: %d; cloud faults injected: %d (fault sets %d); instances killed: %d\n",
		r.kills, r.faultsInjected, r.faultSets, r.instancesKilled)
	if len(r.counts) > 0 {
		var c []string
		for _, name := range slices.Sorted(maps.Keys(r.counts)) {
			c = append(c, fmt.Sprintf("%s %d", name, r.counts[name]))
		}
		fmt.Fprintf(w, "below the manager: %s\n", strings.Join(c, "; "))
	}
	for _, l := range r.lines {
		fmt.Fprintf(w, "  %s\n", l)
	}
	for name, sample := range r.refusedSample {
		fmt.Fprintf(w, "  last refusal of %s: %s\n", name, sample)
	}
	bad := 0
	for _, inv := range invariants {
		if inv == invLease && o.Replicas < 2 {
			continue // one manager elects no leader
		}
		vs := r.violations[inv]
		bad += len(vs)
		status := "OK"
		if len(vs) > 0 {
			status = "FAIL"
		}
		fmt.Fprintf(w, "%-4s %s: %d checks over %d observations, %d violations\n", status, inv, r.checks[inv], r.observations, len(vs))
		for _, v := range vs {
			fmt.Fprintf(w, "       %8s %s\n", v.At, v.Detail)
		}
	}
	if bad > 0 {
		flag := ""
		if o.Upstream {
			flag = " -upstream"
		}
		fmt.Fprintf(w, "%d violations; replay with: go run ./bench soak%s -seed %d -duration %s -machines %d -machinesets %d -faults %s -replicas %d\n",
			bad, flag, o.Seed, o.Duration, o.Machines, o.Sets, o.Faults, o.Replicas)
	}
}
