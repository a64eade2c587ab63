package main

import (
	"strings"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// TestScenariosSmall runs the scale scenarios and their floors at three Machines each, so
// a change to the harness that breaks one (a floor once type-asserted a reader it no longer
// got) fails here rather than in the next session's measurements. Nothing is timed: the
// checks are that each scenario finishes, that a floor sends exactly the writes per Machine
// its documentation lists (docs/performance.md), and that a scenario with a manager reports
// its writes and the queues of the controllers it drives.
func TestScenariosSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("each scenario starts a lab; -short skips them")
	}
	ctrllog.SetLogger(logr.Discard())
	const n = 3
	// Not parallel, so before the others: it sets the flags the scenarios read.
	t.Run("compare mapi-scale aws", func(t *testing.T) { compareMachineAPI(t, n) })
	t.Run("capi-scale aws", func(t *testing.T) { capiScaleAWS(t, n) })
	for _, tc := range []struct {
		scenario string
		// floorWrites is the exact writes per Machine of a floor (no manager); 0 for a
		// scenario with a manager, whose writes are only checked to be there.
		floorWrites int64
		// queue is a controller whose queue report the scenario must print.
		queue string
	}{
		{scenario: "mapi-floor", floorWrites: 6},
		{scenario: "capi-floor", floorWrites: 10},
		{scenario: "mirror-floor", floorWrites: 8},
		{scenario: "migrate-floor", floorWrites: 13},
		{scenario: "mapi-scale", queue: "machineapi-machineset adds="},
		{scenario: "capi-scale", queue: "clusterapi-machineset adds="},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			t.Parallel() // each scenario has a lab, a cloud and a manager process of its own
			r, err := scenarios[tc.scenario](n)
			if err != nil {
				t.Fatalf("%s -n %d: %v", tc.scenario, n, err)
			}
			if r.N != n || r.Seconds <= 0 {
				t.Errorf("row N=%d seconds=%.1f, want N=%d and a positive time", r.N, r.Seconds, n)
			}
			switch {
			case tc.floorWrites > 0 && r.ManagerWrites != tc.floorWrites*n:
				t.Errorf("the floor sent %d writes for %d Machines, want %d per Machine", r.ManagerWrites, n, tc.floorWrites)
			case tc.floorWrites == 0 && r.ManagerWrites < n:
				t.Errorf("the manager's writes read %d for %d Machines", r.ManagerWrites, n)
			}
			if tc.queue != "" && !strings.Contains(r.Extra, tc.queue) {
				t.Errorf("the report names no %q queue:\n%s", strings.TrimSuffix(tc.queue, " adds="), r.Extra)
			}
		})
	}
}

// compareMachineAPI runs compare's mapi-scale on the AWS path: machina's Machine API
// controllers, then machine-api-operator's with machina's EC2 actuator; both report their
// writes from the audit log (machine-api-operator's including its nodelink-controller's Node
// updates) and the API server's CPU, which the ratios need.
func compareMachineAPI(t *testing.T, n int) {
	platform = "aws"
	defer func() { platform = "sim" }()
	rows, err := compareRuns("mapi-scale", intList{n})
	if err != nil {
		t.Fatal(err)
	}
	for side, who := range []string{"machina", "machine-api-operator"} {
		r := rows[side][0]
		if r.N != n || r.ManagerWrites < int64(n) || r.APIServerCPU <= 0 {
			t.Errorf("%s: N %d, %d writes, apiserver %.1f CPU-s", who, r.N, r.ManagerWrites, r.APIServerCPU)
		}
	}
	if peer := strings.Join(rows[1][0].Lines, "\n"); !strings.Contains(peer, "machine-api-controllers from the audit log") ||
		!strings.Contains(peer, "update nodes") {
		t.Errorf("machine-api-operator's writes are not counted from the audit log, nodelink's Node updates among them:\n%s", peer)
	}
	for side, who := range []string{"machina", "machine-api-operator"} {
		if lines := strings.Join(rows[side][0].Lines, "\n"); !strings.Contains(lines, "EC2 calls per second: mean ") {
			t.Errorf("%s: no EC2 call rate:\n%s", who, lines)
		}
	}
	if machineAPI != "machina" || auditWrites {
		t.Errorf("compare left -machine-api %s, -audit %v", machineAPI, auditWrites)
	}
}

// capiScaleAWS runs capi-scale on the AWS path: machina's Cluster API core with the upstream
// CAPA controller as the provider, through the EC2 front; CAPA's EC2 calls are counted.
func capiScaleAWS(t *testing.T, n int) {
	platform = "aws"
	defer func() { platform = "sim" }()
	r, err := capiScale(n)
	if err != nil {
		t.Fatal(err)
	}
	if r.N != n || r.ManagerWrites < int64(n) {
		t.Errorf("N %d, %d writes of machina's core", r.N, r.ManagerWrites)
	}
	if !strings.Contains(r.Extra, "EC2 calls/M") {
		t.Errorf("no EC2 calls: %s", r.Extra)
	}
}
