package ec2

import (
	"context"
	"net/netip"

	"github.com/machina-dev/machina/internal/cloud/api"
)

// Model is the simulated cloud as the EC2 front sees it. The server
// (internal/cloud/server) implements it over its one instance store, state machine and
// faults, so the JSON API and this front show the same instances.
type Model interface {
	// Catalogue is the merged catalogue; its AWS section is the network this front serves.
	Catalogue() api.Catalogue
	// Launch launches req.Count instances in one transaction, or returns the ones an
	// earlier Launch with the same token created (Created false). The same token with
	// another Hash fails with api.CodeIdempotentMismatch.
	Launch(ctx context.Context, req LaunchRequest) (LaunchResult, error)
	// Instances returns the visible instances of a region ordered by launch time; with
	// ids, only those of them that exist.
	Instances(region string, ids ...string) []api.Instance
	// TerminateInstances terminates instances (idempotently), as the JSON API does.
	TerminateInstances(ctx context.Context, ids []string) ([]api.InstanceStateChange, error)
	// StopInstances stops running instances; StartInstances starts stopped ones.
	StopInstances(ctx context.Context, ids []string) ([]api.InstanceStateChange, error)
	StartInstances(ctx context.Context, ids []string) ([]api.InstanceStateChange, error)
	// UpdateInstances changes the tags and EC2 attributes of instances in one
	// transaction: fn gets copies (tags never nil; ext nil for an instance without EC2
	// attributes) and changes them in place; an error from fn changes nothing.
	UpdateInstances(ctx context.Context, ids []string, fn func(id string, tags map[string]string, ext *api.EC2Attributes) error) error
	// InjectFaults applies the error, latency and throttle faults of operation op to a
	// call about instances ids or a launch with tags.
	InjectFaults(ctx context.Context, op string, ids []string, tags map[string]string) error
	// RecordCall counts a call of op (and whether it failed or was throttled) in the
	// cloud's stats.
	RecordCall(op string, failed, throttled bool)
}

// LaunchRequest is RunInstances as the model executes it.
type LaunchRequest struct {
	// Token identifies the request (the client's ClientToken, or a random one); Hash
	// fingerprints its parameters.
	Token, Hash  string
	Count        int
	Region, Zone string
	InstanceType string
	Image        string
	UserData     []byte
	Tags         map[string]string
	// Pools are the address pools of the instance's network interfaces, in the order of
	// EC2.NetworkInterfaces: one address each per instance, never reused.
	Pools []AddressPool
	// EC2 is the attributes template; per instance the model fills in the reservation,
	// launch index, interface and volume IDs and interface addresses.
	EC2 api.EC2Attributes
}

// AddressPool is a subnet addresses come from.
type AddressPool struct {
	Key  string
	CIDR netip.Prefix
}

// LaunchResult is the reservation of a Launch.
type LaunchResult struct {
	Instances []api.Instance
	Created   bool
}
