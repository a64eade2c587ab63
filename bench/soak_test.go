package main

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/machina-dev/machina/internal/cli"
)

// TestMain lets the test binary be the soak's manager child process, as the bench binary is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "manager" {
		os.Exit(cli.Execute())
	}
	os.Exit(m.Run())
}

// TestSoakShort is the soak's short variant (docs/migration.md, "The soak"): 90 seconds of
// random scaling, deletions, migrations and rollbacks on both APIs, with manager SIGKILLs and
// cloud faults, at a fixed seed; every invariant must hold. `go run ./bench soak` runs the
// long version with any seed.
func TestSoakShort(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak takes minutes; -short skips it")
	}
	runSoakTest(t, soakOptions{Duration: 90 * time.Second, Machines: 16, Seed: 1, Sets: 4, Settle: 4 * time.Minute})
}

// runSoakTest runs a soak, logs its report and fails the test on an error or a violation.
func runSoakTest(t *testing.T, o soakOptions) *soakReport {
	t.Helper()
	ctrllog.SetLogger(logr.Discard())
	rep, err := runSoak(o)
	if rep != nil {
		var out bytes.Buffer
		rep.print(&out, o)
		t.Log("\n" + out.String())
	}
	if err != nil {
		t.Fatalf("soak (seed %d): %v", o.Seed, err)
	}
	if rep.failed() {
		t.Fatalf("soak (seed %d): invariants violated (report above)", o.Seed)
	}
	return rep
}

// TestSoakBelow is the short variant of the soak with faults below the manager
// (docs/migration.md, "The soak"): two manager replicas electing a leader, the API server and
// etcd SIGKILLed and restarted, etcd compacted, a replica cut off from the API server and the
// leader SIGKILLed or cut off while a handover is under way, beside the default faults. Every
// invariant must hold, no replica may write after losing the Lease, and the faults the issue
// names must have happened: an API server restart and a leadership change mid-handover.
func TestSoakBelow(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak takes minutes; -short skips it")
	}
	rep := runSoakTest(t, soakOptions{Duration: 70 * time.Second, Machines: 12, Seed: 3, Sets: 4, Settle: 4 * time.Minute,
		Faults: "all", Replicas: 2, BelowEvery: 11 * time.Second, CutMax: 35 * time.Second})
	for name, least := range map[string]int{faultAPIServer: 1, "leader faults mid-handover": 1, "leadership terms": 2} {
		if rep.counts[name] < least {
			t.Errorf("%s: %d, want at least %d", name, rep.counts[name], least)
		}
	}
	if rep.checks[invLease] == 0 {
		t.Error("no replica write was checked against the Lease's terms")
	}
}
