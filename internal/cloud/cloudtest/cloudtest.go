// Package cloudtest starts a simulated cloud for a test and stops it when the test ends.
package cloudtest

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/cloud/ec2"
	"github.com/machina-dev/machina/internal/cloud/server"
	"github.com/machina-dev/machina/internal/lab"
)

// Cloud is a running test cloud.
type Cloud struct {
	Server *server.Server
	Client *client.Client
	URL    string
}

// Option adjusts the server options of a test cloud.
type Option func(*server.Options)

// WithKubelet runs the simulated kubelet against cfg (e.g. a labtest lab's Config), with
// intervals short enough for tests and for the lab's kube-controller-manager.
func WithKubelet(cfg *rest.Config) Option {
	return func(o *server.Options) {
		o.KubeConfig = cfg
		o.Kubelet.SyncInterval = 100 * time.Millisecond
		o.Kubelet.RenewInterval = lab.KubeletHeartbeatInterval
		o.Kubelet.StatusInterval = 5 * time.Second
	}
}

// WithDelays sets the instance lifecycle delays (default: all zero, so instances are
// running at once and terminated at once).
func WithDelays(d server.Delays) Option { return func(o *server.Options) { o.Delays = d } }

// WithEC2 also serves the EC2 front (lab credentials unless opts names others); reach it
// at Cloud.Server.EC2().URL().
func WithEC2(opts ec2.Options) Option { return func(o *server.Options) { o.EC2 = &opts } }

// WithOptions edits the server options directly.
func WithOptions(f func(*server.Options)) Option { return Option(f) }

// Start runs a cloud on a free loopback port with a temporary state directory, no fsync,
// a fixed fault seed and a 50ms sweep (purge and scaling groups). The returned client
// retries quickly. The cloud is closed when the test ends.
func Start(t testing.TB, opts ...Option) *Cloud {
	t.Helper()
	o := server.Options{
		StateDir:      t.TempDir(),
		NoSync:        true,
		Seed:          1,
		SweepInterval: 50 * time.Millisecond,
	}
	for _, f := range opts {
		f(&o)
	}
	s, err := server.New(o)
	if err != nil {
		t.Fatalf("cloudtest: %v", err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatalf("cloudtest: %v", err)
	}
	t.Cleanup(s.Close)
	c, err := client.New(s.URL(), client.Options{MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("cloudtest: %v", err)
	}
	return &Cloud{Server: s, Client: c, URL: s.URL()}
}
