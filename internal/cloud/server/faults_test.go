package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/cloud/server"
)

func TestFaultErrorRate(t *testing.T) {
	s, c := start(t, server.Options{})
	// Two failures, then the fault is used up: the retrying client gets through.
	f, err := c.CreateFault(ctx(t), api.Fault{Kind: api.FaultError, Operation: api.OpRunInstances, Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	if f.FaultID == "" || f.StatusCode != 500 {
		t.Errorf("stored fault = %+v", f)
	}
	inst := mustRun(t, c, runReq(nil))
	st := s.Stats()
	if o := st.Operations[api.OpRunInstances]; o.Calls != 3 || o.Errors != 2 || o.Injected != 2 {
		t.Errorf("RunInstances stats = %+v, want 3 calls, 2 errors", o)
	}
	if st.InstancesCreated != 1 {
		t.Errorf("instances created = %d", st.InstancesCreated)
	}
	if faults, _ := c.DescribeFaults(ctx(t)); len(faults) != 0 {
		t.Errorf("used-up fault still listed: %+v", faults)
	}

	// Without retries the caller sees the 503.
	noRetry := newClient(t, s.URL(), -1)
	if _, err := c.CreateFault(ctx(t), api.Fault{Kind: api.FaultError, Operation: api.OpDescribeInstances, StatusCode: 503}); err != nil {
		t.Fatal(err)
	}
	_, err = noRetry.GetInstance(ctx(t), inst.InstanceID)
	if !client.HasCode(err, api.CodeServiceUnavailable) {
		t.Errorf("DescribeInstances under an error fault: %v", err)
	}
	// Other operations are unaffected.
	if _, err := noRetry.DescribeRegions(ctx(t)); err != nil {
		t.Errorf("DescribeRegions: %v", err)
	}
	if n, err := c.ClearFaults(ctx(t)); err != nil || n != 1 {
		t.Errorf("ClearFaults = %d, %v", n, err)
	}
	if _, err := noRetry.GetInstance(ctx(t), inst.InstanceID); err != nil {
		t.Errorf("after clearing: %v", err)
	}

	// A rate: the seeded source makes about half the calls fail.
	if _, err := c.CreateFault(ctx(t), api.Fault{Kind: api.FaultError, Operation: api.OpDescribeRegions, Rate: 0.5}); err != nil {
		t.Fatal(err)
	}
	failed := 0
	for range 200 {
		if _, err := noRetry.DescribeRegions(ctx(t)); err != nil {
			failed++
		}
	}
	if failed < 60 || failed > 140 {
		t.Errorf("%d of 200 calls failed at rate 0.5", failed)
	}
}

func TestFaultScopedToTagsAndIDs(t *testing.T) {
	s, c := start(t, server.Options{})
	noRetry := newClient(t, s.URL(), -1)
	a := mustRun(t, c, runReq(map[string]string{"cluster": "a"}))
	b := mustRun(t, c, runReq(map[string]string{"cluster": "b"}))
	if _, err := c.CreateFault(ctx(t), api.Fault{Kind: api.FaultError, Tags: map[string]string{"cluster": "a"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := noRetry.GetInstance(ctx(t), a.InstanceID); err == nil {
		t.Errorf("describe of a tagged instance was not faulted")
	}
	if _, err := noRetry.GetInstance(ctx(t), b.InstanceID); err != nil {
		t.Errorf("describe of an untagged instance: %v", err)
	}
	if _, err := noRetry.RunInstances(ctx(t), runReq(map[string]string{"cluster": "a"})); err == nil {
		t.Errorf("RunInstances with matching tags was not faulted")
	}
	if _, err := noRetry.RunInstances(ctx(t), runReq(map[string]string{"cluster": "c"})); err != nil {
		t.Errorf("RunInstances with other tags: %v", err)
	}
	_, _ = c.ClearFaults(ctx(t))
	if _, err := c.CreateFault(ctx(t), api.Fault{Kind: api.FaultError, Operation: api.OpTerminateInstances, InstanceIDs: []string{b.InstanceID}}); err != nil {
		t.Fatal(err)
	}
	if _, err := noRetry.TerminateInstances(ctx(t), b.InstanceID); err == nil {
		t.Errorf("terminate of the faulted ID succeeded")
	}
	if _, err := noRetry.TerminateInstances(ctx(t), a.InstanceID); err != nil {
		t.Errorf("terminate of another ID: %v", err)
	}
}

func TestFaultLatency(t *testing.T) {
	s, c := start(t, server.Options{})
	if _, err := c.CreateFault(ctx(t), api.Fault{Kind: api.FaultLatency, Operation: api.OpDescribeInstances, LatencyMillis: 250}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if _, err := c.DescribeInstances(ctx(t), api.DescribeInstancesRequest{}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(began); d < 250*time.Millisecond {
		t.Errorf("DescribeInstances took %s, want at least 250ms", d)
	}
	if _, err := c.DescribeRegions(ctx(t)); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.Operations[api.OpDescribeInstances].Injected != 1 || st.Operations[api.OpDescribeRegions].Injected != 0 {
		t.Errorf("injected: DescribeInstances %d, DescribeRegions %d; want 1 and 0",
			st.Operations[api.OpDescribeInstances].Injected, st.Operations[api.OpDescribeRegions].Injected)
	}
}

func TestFaultThrottleHonoursRetryAfter(t *testing.T) {
	s, c := start(t, server.Options{})
	if _, err := c.CreateFault(ctx(t), api.Fault{Kind: api.FaultThrottle, Operation: api.OpRunInstances, RetryAfterSeconds: 1, Count: 1}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	mustRun(t, c, runReq(nil))
	if d := time.Since(began); d < time.Second {
		t.Errorf("throttled call returned after %s; Retry-After was 1s", d)
	}
	if o := s.Stats().Operations[api.OpRunInstances]; o.Throttled != 1 || o.Calls != 2 {
		t.Errorf("stats = %+v", o)
	}

	// A deadline shorter than Retry-After: the client gives up at once with the 429.
	if _, err := c.CreateFault(ctx(t), api.Fault{Kind: api.FaultThrottle, Operation: api.OpDescribeRegions, RetryAfterSeconds: 5}); err != nil {
		t.Fatal(err)
	}
	cx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	began = time.Now()
	_, err := c.DescribeRegions(cx)
	if !client.IsThrottled(err) {
		t.Fatalf("want a throttling error, got %v", err)
	}
	if ae, _ := client.AsError(err); ae.RetryAfter != 5*time.Second {
		t.Errorf("RetryAfter = %s", ae.RetryAfter)
	}
	if d := time.Since(began); d > 500*time.Millisecond {
		t.Errorf("gave up after %s", d)
	}
}

func TestFaultCapacity(t *testing.T) {
	_, c := start(t, server.Options{})
	f, err := c.CreateFault(ctx(t), api.Fault{Kind: api.FaultCapacity, Zone: "sim-east-1a"})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_, err = c.RunInstances(ctx(t), runReq(nil))
	if !client.IsCapacity(err) || client.InvalidField(err) != "zone" {
		t.Fatalf("launch in a full zone: %v", err)
	}
	if time.Since(began) > 500*time.Millisecond {
		t.Errorf("the client retried a capacity error")
	}
	other := runReq(nil)
	other.Zone = "sim-east-1b"
	mustRun(t, c, other)

	if _, err := c.CreateFault(ctx(t), api.Fault{Kind: api.FaultCapacity, InstanceType: "s1.small"}); err != nil {
		t.Fatal(err)
	}
	small := runReq(nil)
	small.Zone, small.InstanceType = "sim-east-1b", "s1.small"
	if _, err := c.RunInstances(ctx(t), small); !client.IsCapacity(err) || client.InvalidField(err) != "instanceType" {
		t.Errorf("launch of a type without capacity: %v", err)
	}
	if n, err := c.DeleteFaults(ctx(t), f.FaultID); err != nil || n != 1 {
		t.Fatalf("DeleteFaults = %d, %v", n, err)
	}
	mustRun(t, c, runReq(nil))
}

func TestKillInstances(t *testing.T) {
	_, c := start(t, server.Options{Delays: server.Delays{ShuttingDown: time.Hour}})
	a := mustRun(t, c, runReq(map[string]string{"pool": "doomed"}))
	b := mustRun(t, c, runReq(map[string]string{"pool": "doomed"}))
	keep := mustRun(t, c, runReq(map[string]string{"pool": "safe"}))
	killed, err := c.KillInstances(ctx(t), api.KillInstancesRequest{Tags: map[string]string{"pool": "doomed"}})
	if err != nil || len(killed) != 2 {
		t.Fatalf("KillInstances = %+v, %v", killed, err)
	}
	for _, id := range []string{a.InstanceID, b.InstanceID} {
		i, err := c.GetInstance(ctx(t), id)
		// Killed instances skip the shutdown delay.
		if err != nil || i.State != api.StateTerminated || i.StateReason != api.ReasonInjectedKill {
			t.Errorf("killed instance %s: %+v, %v", id, i, err)
		}
	}
	if st, _ := stateOf(t, c, keep.InstanceID); st != api.StateRunning {
		t.Errorf("untargeted instance is %s", st)
	}
	if killed, err := c.KillInstances(ctx(t), api.KillInstancesRequest{InstanceIDs: []string{keep.InstanceID}}); err != nil || len(killed) != 1 {
		t.Errorf("kill by ID: %+v, %v", killed, err)
	}
	if _, err := c.KillInstances(ctx(t), api.KillInstancesRequest{}); !client.IsInvalid(err) {
		t.Errorf("kill without selection: %v", err)
	}
}

func TestFaultsPersistAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	s1, c1 := start(t, server.Options{StateDir: dir})
	if _, err := c1.CreateFault(ctx(t), api.Fault{Kind: api.FaultCapacity, Zone: "sim-east-1a"}); err != nil {
		t.Fatal(err)
	}
	s1.Close()
	s2, c2 := start(t, server.Options{StateDir: dir, Faults: []api.Fault{{Kind: api.FaultLatency, LatencyMillis: 1, Operation: api.OpDescribeRegions}}})
	faults, err := c2.DescribeFaults(ctx(t))
	if err != nil || len(faults) != 2 {
		t.Fatalf("faults after restart: %+v, %v", faults, err)
	}
	if _, err := c2.RunInstances(ctx(t), runReq(nil)); !client.IsCapacity(err) {
		t.Errorf("persisted capacity fault not applied: %v", err)
	}
	// Starting again with the same start-up fault does not add a copy.
	s2.Close()
	_, c3 := start(t, server.Options{StateDir: dir, Faults: []api.Fault{{Kind: api.FaultLatency, LatencyMillis: 1, Operation: api.OpDescribeRegions}}})
	if faults, err := c3.DescribeFaults(ctx(t)); err != nil || len(faults) != 2 {
		t.Errorf("faults after a second restart: %+v, %v", faults, err)
	}
}

func TestFaultValidation(t *testing.T) {
	_, c := start(t, server.Options{})
	cases := []struct {
		f     api.Fault
		field string
	}{
		{api.Fault{}, "fault.kind"},
		{api.Fault{Kind: "explode"}, "fault.kind"},
		{api.Fault{Kind: api.FaultError, Operation: "Nope"}, "fault.operation"},
		{api.Fault{Kind: api.FaultError, Operation: api.OpCreateFault}, "fault.operation"},
		{api.Fault{Kind: api.FaultError, Rate: 1.5}, "fault.rate"},
		{api.Fault{Kind: api.FaultError, StatusCode: 418}, "fault.statusCode"},
		{api.Fault{Kind: api.FaultLatency}, "fault.latencyMillis"},
		{api.Fault{Kind: api.FaultCapacity}, "fault.zone"},
		{api.Fault{Kind: api.FaultCapacity, Zone: "mars-1a"}, "fault.zone"},
		{api.Fault{Kind: api.FaultNodeNotReady}, "fault.instanceIDs"},
		{api.Fault{Kind: api.FaultNodeCondition, InstanceIDs: []string{"i-1"}}, "fault.conditionType"},
		{api.Fault{Kind: api.FaultNodeCondition, InstanceIDs: []string{"i-1"}, ConditionType: "X", ConditionStatus: "Maybe"}, "fault.conditionStatus"},
	}
	for _, tc := range cases {
		_, err := c.CreateFault(ctx(t), tc.f)
		if !client.IsInvalid(err) || client.InvalidField(err) != tc.field {
			t.Errorf("fault %+v: %v, want invalid %s", tc.f, err, tc.field)
		}
	}
	if _, err := server.New(server.Options{StateDir: t.TempDir(), Faults: []api.Fault{{Kind: "bogus"}}}); err == nil {
		t.Errorf("New accepted an invalid start-up fault")
	}
}
