package server_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/cloud/server"
)

// start runs a server on a loopback port with opts (StateDir defaults to a temp dir) and
// returns it with a client that retries quickly.
func start(t testing.TB, opts server.Options) (*server.Server, *client.Client) {
	t.Helper()
	if opts.StateDir == "" {
		opts.StateDir = t.TempDir()
	}
	if opts.Seed == 0 {
		opts.Seed = 42
	}
	s, err := server.New(opts)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(s.Close)
	return s, newClient(t, s.URL(), 0)
}

func newClient(t testing.TB, url string, maxRetries int) *client.Client {
	t.Helper()
	c, err := client.New(url, client.Options{MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, MaxRetries: maxRetries})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ctx(t testing.TB) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

var tokenSeq atomic.Int64

// runReq is a valid RunInstances request with a fresh token.
func runReq(tags map[string]string) api.RunInstancesRequest {
	return api.RunInstancesRequest{
		ClientToken:  fmt.Sprintf("token-%d", tokenSeq.Add(1)),
		Region:       "sim-east-1",
		Zone:         "sim-east-1a",
		InstanceType: "s1.large",
		Image:        "sim-rhcos-9",
		UserData:     []byte("#!/bin/sh\necho hello\n"),
		Tags:         tags,
	}
}

func mustRun(t testing.TB, c *client.Client, req api.RunInstancesRequest) api.Instance {
	t.Helper()
	out, err := c.RunInstances(ctx(t), req)
	if err != nil {
		t.Fatalf("RunInstances: %v", err)
	}
	return out.Instance
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var lastErr error
	for {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, lastErr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func stateOf(t testing.TB, c *client.Client, id string) (api.InstanceState, error) {
	i, err := c.GetInstance(ctx(t), id)
	if err != nil {
		return "", err
	}
	return i.State, nil
}
