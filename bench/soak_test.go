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
	ctrllog.SetLogger(logr.Discard())
	o := soakOptions{Duration: 90 * time.Second, Machines: 16, Seed: 1, Sets: 4, Settle: 4 * time.Minute}
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
}
