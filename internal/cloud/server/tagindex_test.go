package server_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/server"
)

// A lookup by tag answers from the tag index: it must follow every change of the
// instances — tags changed through the EC2 front, a restart that rebuilds it from the state
// file, termination and the purge of terminated instances.
func TestDescribeByTagFollowsChanges(t *testing.T) {
	dir := t.TempDir()
	opts := server.Options{StateDir: dir, Delays: server.Delays{TerminatedRetention: 300 * time.Millisecond}, SweepInterval: 20 * time.Millisecond}
	s, c := start(t, opts)
	a := mustRun(t, c, runReq(map[string]string{"machine": "a", "pool": "x"}))
	b := mustRun(t, c, runReq(map[string]string{"machine": "b", "pool": "x"}))
	find := func(tags map[string]string) []string {
		t.Helper()
		l, err := c.DescribeInstances(ctx(t), api.DescribeInstancesRequest{Tags: tags})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, i := range l {
			ids = append(ids, i.InstanceID)
		}
		return ids
	}
	expect := func(what string, tags map[string]string, want ...string) {
		t.Helper()
		if got := find(tags); !slices.Equal(got, want) {
			t.Errorf("%s: %v found %v, want %v", what, tags, got, want)
		}
	}
	expect("launched", map[string]string{"machine": "a"}, a.InstanceID)
	expect("launched", map[string]string{"pool": "x", "machine": "b"}, b.InstanceID)

	// Retag a through the EC2 front's model: found by its new tag only.
	if err := s.UpdateInstances(ctx(t), []string{a.InstanceID}, func(_ string, tags map[string]string, _ *api.EC2Attributes) error {
		tags["machine"] = "a2"
		delete(tags, "pool")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	expect("retagged", map[string]string{"machine": "a"})
	expect("retagged", map[string]string{"machine": "a2"}, a.InstanceID)
	expect("retagged", map[string]string{"pool": "x"}, b.InstanceID)
	expect("retagged", map[string]string{"pool": "*"}, b.InstanceID)

	// A new server on the same state file rebuilds the index.
	s.Close()
	_, c = start(t, opts)
	expect("restarted", map[string]string{"machine": "a2"}, a.InstanceID)
	expect("restarted", map[string]string{"pool": "x"}, b.InstanceID)

	// Terminated instances are still found until they are purged, then never again.
	if _, err := c.TerminateInstances(ctx(t), b.InstanceID); err != nil {
		t.Fatal(err)
	}
	expect("terminated", map[string]string{"pool": "x"}, b.InstanceID)
	eventually(t, 5*time.Second, "purge", func() (bool, error) {
		return len(find(map[string]string{"pool": "x"})) == 0, nil
	})
	expect("purged", map[string]string{"machine": "b"})
	expect("purged", map[string]string{"machine": "a2"}, a.InstanceID)
}

// BenchmarkDescribeByTag measures the lookup the Machine controllers make before each
// create, the one instance carrying a Machine's UID, among 5,000.
func BenchmarkDescribeByTag(b *testing.B) {
	_, c := start(b, server.Options{NoSync: true})
	const n = 5000
	for i := range n {
		mustRun(b, c, runReq(map[string]string{"machine-uid": fmt.Sprint(i), "cluster": "c"}))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		l, err := c.DescribeInstances(ctx(b), api.DescribeInstancesRequest{Tags: map[string]string{"machine-uid": fmt.Sprint(i % n)}})
		if err != nil || len(l) != 1 {
			b.Fatal(len(l), err)
		}
	}
}
