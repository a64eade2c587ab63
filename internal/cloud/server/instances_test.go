package server_test

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/cloud/server"
)

func TestRunDescribeTerminate(t *testing.T) {
	_, c := start(t, server.Options{})
	req := runReq(map[string]string{"cluster": "a", "role": "worker"})
	inst := mustRun(t, c, req)

	if inst.State != api.StateRunning {
		t.Errorf("state with zero delays = %s, want running", inst.State)
	}
	if !strings.HasPrefix(inst.InstanceID, "i-") || inst.ProviderID != "sim://sim-east-1/sim-east-1a/"+inst.InstanceID {
		t.Errorf("instance ID %q / provider ID %q", inst.InstanceID, inst.ProviderID)
	}
	if inst.Hostname != inst.InstanceID+".sim-east-1.compute.internal" {
		t.Errorf("hostname = %q", inst.Hostname)
	}
	if ip, err := netip.ParseAddr(inst.PrivateIP); err != nil || !netip.MustParsePrefix("100.64.0.0/10").Contains(ip) {
		t.Errorf("private IP %q not in the default pool", inst.PrivateIP)
	}
	if inst.Architecture != "amd64" || inst.Tags["cluster"] != "a" || inst.ClientToken != req.ClientToken {
		t.Errorf("instance = %+v", inst)
	}
	if inst.UserData != nil {
		t.Errorf("user data returned without IncludeUserData")
	}

	got, err := c.DescribeInstances(ctx(t), api.DescribeInstancesRequest{InstanceIDs: []string{inst.InstanceID}, IncludeUserData: true})
	if err != nil || len(got) != 1 || got[0].InstanceID != inst.InstanceID {
		t.Fatalf("DescribeInstances by ID = %v, %v", got, err)
	}
	if !bytes.Equal(got[0].UserData, req.UserData) {
		t.Errorf("user data = %q, want %q", got[0].UserData, req.UserData)
	}

	changes, err := c.TerminateInstances(ctx(t), inst.InstanceID)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].PreviousState != api.StateRunning || changes[0].CurrentState != api.StateTerminated {
		t.Errorf("terminate changes = %+v", changes)
	}
	// Idempotent: a second terminate succeeds and changes nothing.
	changes, err = c.TerminateInstances(ctx(t), inst.InstanceID)
	if err != nil || changes[0].PreviousState != api.StateTerminated || changes[0].CurrentState != api.StateTerminated {
		t.Errorf("second terminate = %+v, %v", changes, err)
	}
	i, err := c.GetInstance(ctx(t), inst.InstanceID)
	if err != nil || i.State != api.StateTerminated || i.StateReason != api.ReasonUserInitiated {
		t.Errorf("terminated instance = %+v, %v", i, err)
	}

	_, err = c.DescribeInstances(ctx(t), api.DescribeInstancesRequest{InstanceIDs: []string{inst.InstanceID, "i-doesnotexist"}})
	if !client.IsNotFound(err) || client.InvalidField(err) != "instanceIDs" || !strings.Contains(err.Error(), "i-doesnotexist") {
		t.Errorf("describe with unknown ID: %v", err)
	}
	if _, err := c.TerminateInstances(ctx(t), "i-doesnotexist"); !client.IsNotFound(err) {
		t.Errorf("terminate unknown: %v", err)
	}
}

func TestDescribeFilters(t *testing.T) {
	_, c := start(t, server.Options{})
	a1 := mustRun(t, c, runReq(map[string]string{"cluster": "a", "pool": "x"}))
	a2 := mustRun(t, c, runReq(map[string]string{"cluster": "a", "pool": "y"}))
	reqB := runReq(map[string]string{"cluster": "b"})
	reqB.Zone = "sim-east-1b"
	b := mustRun(t, c, reqB)
	if _, err := c.TerminateInstances(ctx(t), a2.InstanceID); err != nil {
		t.Fatal(err)
	}
	ids := func(l []api.Instance) []string {
		var out []string
		for _, i := range l {
			out = append(out, i.InstanceID)
		}
		return out
	}
	cases := []struct {
		name string
		req  api.DescribeInstancesRequest
		want []string
	}{
		{"all", api.DescribeInstancesRequest{}, []string{a1.InstanceID, a2.InstanceID, b.InstanceID}},
		{"tag", api.DescribeInstancesRequest{Tags: map[string]string{"cluster": "a"}}, []string{a1.InstanceID, a2.InstanceID}},
		{"two tags", api.DescribeInstancesRequest{Tags: map[string]string{"cluster": "a", "pool": "y"}}, []string{a2.InstanceID}},
		{"wildcard", api.DescribeInstancesRequest{Tags: map[string]string{"pool": "*"}}, []string{a1.InstanceID, a2.InstanceID}},
		{"no match", api.DescribeInstancesRequest{Tags: map[string]string{"cluster": "c"}}, nil},
		{"state", api.DescribeInstancesRequest{Tags: map[string]string{"cluster": "a"}, States: []api.InstanceState{api.StateRunning}}, []string{a1.InstanceID}},
		{"zone", api.DescribeInstancesRequest{Zone: "sim-east-1b"}, []string{b.InstanceID}},
		{"ids and tag", api.DescribeInstancesRequest{InstanceIDs: []string{a1.InstanceID, b.InstanceID}, Tags: map[string]string{"cluster": "b"}}, []string{b.InstanceID}},
	}
	for _, tc := range cases {
		got, err := c.DescribeInstances(ctx(t), tc.req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if g := strings.Join(ids(got), ","); g != strings.Join(tc.want, ",") {
			t.Errorf("%s: got %s, want %s", tc.name, g, strings.Join(tc.want, ","))
		}
	}
}

func TestRunInstancesIdempotentAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	s1, c1 := start(t, server.Options{StateDir: dir})
	req := runReq(map[string]string{"machine": "m1"})
	first, err := c1.RunInstances(ctx(t), req)
	if err != nil || !first.Created {
		t.Fatalf("first RunInstances: %+v, %v", first, err)
	}
	again, err := c1.RunInstances(ctx(t), req)
	if err != nil || again.Created || again.Instance.InstanceID != first.Instance.InstanceID {
		t.Fatalf("repeated RunInstances: %+v, %v", again, err)
	}
	other := req
	other.InstanceType = "s1.small"
	if _, err := c1.RunInstances(ctx(t), other); !client.IsConflict(err) || !client.HasCode(err, api.CodeIdempotentMismatch) || client.InvalidField(err) != "clientToken" {
		t.Errorf("token reuse with other parameters: %v", err)
	}
	s1.Close()

	s2, c2 := start(t, server.Options{StateDir: dir})
	after, err := c2.RunInstances(ctx(t), req)
	if err != nil || after.Created || after.Instance.InstanceID != first.Instance.InstanceID {
		t.Fatalf("RunInstances after restart: %+v, %v", after, err)
	}
	all, err := c2.DescribeInstances(ctx(t), api.DescribeInstancesRequest{})
	if err != nil || len(all) != 1 {
		t.Fatalf("instances after restart: %d, %v", len(all), err)
	}
	if all[0].PrivateIP != first.Instance.PrivateIP || all[0].Tags["machine"] != "m1" {
		t.Errorf("restored instance = %+v", all[0])
	}
	// A new instance gets a fresh address (the allocation counter survived the restart).
	n := mustRun(t, c2, runReq(nil))
	if n.PrivateIP == first.Instance.PrivateIP {
		t.Errorf("address %s handed out twice", n.PrivateIP)
	}
	if st := s2.Stats(); st.InstancesCreated != 1 || st.Operations[api.OpRunInstances].Calls != 2 {
		t.Errorf("stats after restart: created %d, RunInstances calls %d", st.InstancesCreated, st.Operations[api.OpRunInstances].Calls)
	}
}

func TestStateTransitionsWithDelays(t *testing.T) {
	_, c := start(t, server.Options{Delays: server.Delays{Pending: 300 * time.Millisecond, ShuttingDown: 300 * time.Millisecond}})
	inst := mustRun(t, c, runReq(nil))
	if inst.State != api.StatePending {
		t.Fatalf("new instance state = %s, want pending", inst.State)
	}
	if _, err := c.TerminateInstances(ctx(t), "i-nope"); !client.IsNotFound(err) {
		t.Fatalf("terminate unknown: %v", err)
	}
	eventually(t, 5*time.Second, "running", func() (bool, error) {
		st, err := stateOf(t, c, inst.InstanceID)
		return st == api.StateRunning, err
	})
	i, _ := c.GetInstance(ctx(t), inst.InstanceID)
	if d := i.StateTransitionTime.Sub(i.LaunchTime); d != 300*time.Millisecond {
		t.Errorf("running since launch+%s, want +300ms", d)
	}
	changes, err := c.TerminateInstances(ctx(t), inst.InstanceID)
	if err != nil || changes[0].CurrentState != api.StateShuttingDown {
		t.Fatalf("terminate: %+v, %v", changes, err)
	}
	eventually(t, 5*time.Second, "terminated", func() (bool, error) {
		st, err := stateOf(t, c, inst.InstanceID)
		return st == api.StateTerminated, err
	})

	// Terminating a pending instance goes through shutting-down too.
	p := mustRun(t, c, runReq(nil))
	changes, err = c.TerminateInstances(ctx(t), p.InstanceID)
	if err != nil || changes[0].PreviousState != api.StatePending || changes[0].CurrentState != api.StateShuttingDown {
		t.Fatalf("terminate pending: %+v, %v", changes, err)
	}
}

func TestTerminatedRetentionAndPurge(t *testing.T) {
	dir := t.TempDir()
	_, c := start(t, server.Options{StateDir: dir, Delays: server.Delays{TerminatedRetention: 300 * time.Millisecond}, SweepInterval: 20 * time.Millisecond})
	req := runReq(nil)
	inst := mustRun(t, c, req)
	if _, err := c.TerminateInstances(ctx(t), inst.InstanceID); err != nil {
		t.Fatal(err)
	}
	if st, err := stateOf(t, c, inst.InstanceID); err != nil || st != api.StateTerminated {
		t.Fatalf("right after terminate: %s, %v", st, err)
	}
	eventually(t, 5*time.Second, "purge", func() (bool, error) {
		_, err := c.GetInstance(ctx(t), inst.InstanceID)
		return client.IsNotFound(err), err
	})
	if l, err := c.DescribeInstances(ctx(t), api.DescribeInstancesRequest{}); err != nil || len(l) != 0 {
		t.Errorf("after purge: %v, %v", l, err)
	}
	// The token still never creates a second instance: the terminated one is returned.
	again, err := c.RunInstances(ctx(t), req)
	if err != nil || again.Created || again.Instance.InstanceID != inst.InstanceID || again.Instance.State != api.StateTerminated {
		t.Fatalf("RunInstances with a purged instance's token: %+v, %v", again, err)
	}
}

func TestNetworks(t *testing.T) {
	_, c := start(t, server.Options{})
	req := api.CreateNetworkRequest{ClientToken: "net-1", Region: "sim-east-1", CIDR: "10.20.0.0/24", Tags: map[string]string{"cluster": "a"}}
	n, err := c.CreateNetwork(ctx(t), req)
	if err != nil || !n.Created || n.Network.CIDR != "10.20.0.0/24" {
		t.Fatalf("CreateNetwork: %+v, %v", n, err)
	}
	again, err := c.CreateNetwork(ctx(t), req)
	if err != nil || again.Created || again.Network.NetworkID != n.Network.NetworkID {
		t.Fatalf("repeated CreateNetwork: %+v, %v", again, err)
	}
	auto, err := c.CreateNetwork(ctx(t), api.CreateNetworkRequest{ClientToken: "net-2", Region: "sim-east-1"})
	if err != nil || !strings.HasSuffix(auto.Network.CIDR, ".0.0/16") {
		t.Fatalf("default CIDR: %+v, %v", auto, err)
	}
	rr := runReq(nil)
	rr.NetworkID = n.Network.NetworkID
	inst := mustRun(t, c, rr)
	if ip := netip.MustParseAddr(inst.PrivateIP); !netip.MustParsePrefix("10.20.0.0/24").Contains(ip) || inst.NetworkID != n.Network.NetworkID {
		t.Errorf("instance in network: ip %s network %s", inst.PrivateIP, inst.NetworkID)
	}
	rr2 := runReq(nil)
	rr2.NetworkID, rr2.Region, rr2.Zone = n.Network.NetworkID, "sim-west-1", "sim-west-1a"
	if _, err := c.RunInstances(ctx(t), rr2); !client.IsInvalid(err) || client.InvalidField(err) != "networkID" {
		t.Errorf("network of another region: %v", err)
	}
	nets, err := c.DescribeNetworks(ctx(t), api.DescribeNetworksRequest{Tags: map[string]string{"cluster": "a"}})
	if err != nil || len(nets) != 1 || nets[0].NetworkID != n.Network.NetworkID {
		t.Errorf("DescribeNetworks by tag: %+v, %v", nets, err)
	}
	if err := c.DeleteNetwork(ctx(t), n.Network.NetworkID); !client.HasCode(err, api.CodeDependencyViolation) {
		t.Errorf("delete network in use: %v", err)
	}
	if _, err := c.TerminateInstances(ctx(t), inst.InstanceID); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteNetwork(ctx(t), n.Network.NetworkID); err != nil {
		t.Errorf("delete network: %v", err)
	}
	if err := c.DeleteNetwork(ctx(t), n.Network.NetworkID); err != nil {
		t.Errorf("delete network again: %v", err)
	}
	if _, err := c.DescribeNetworks(ctx(t), api.DescribeNetworksRequest{NetworkIDs: []string{n.Network.NetworkID}}); !client.IsNotFound(err) {
		t.Errorf("describe deleted network: %v", err)
	}
}

func TestCatalogue(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "catalogue.yaml")
	if err := os.WriteFile(file, []byte(`
regions:
- name: sim-north-1
  zones: [sim-north-1a]
instanceTypes:
- name: x1.huge
  vcpu: 64
  memoryMiB: 524288
  gpu: 8
  architecture: amd64
images:
- imageID: sim-custom
`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, c := start(t, server.Options{CatalogueFile: file})
	types, err := c.DescribeInstanceTypes(ctx(t), "x1.huge", "s1.large")
	if err != nil || len(types) != 2 || types[0].VCPU != 64 || types[0].GPU != 8 || types[0].GPUResource != "nvidia.com/gpu" || types[0].MaxPods != 110 {
		t.Fatalf("DescribeInstanceTypes: %+v, %v", types, err)
	}
	all, _ := c.DescribeInstanceTypes(ctx(t))
	if len(all) != len(api.DefaultCatalogue().InstanceTypes)+1 {
		t.Errorf("%d instance types, want defaults + 1", len(all))
	}
	regions, err := c.DescribeRegions(ctx(t))
	if err != nil || len(regions) != 3 {
		t.Errorf("regions: %+v, %v", regions, err)
	}
	rr := runReq(nil)
	rr.Region, rr.Zone, rr.InstanceType, rr.Image = "sim-north-1", "sim-north-1a", "x1.huge", "sim-custom"
	if i := mustRun(t, c, rr); i.InstanceType != "x1.huge" {
		t.Errorf("instance = %+v", i)
	}
	if _, err := c.DescribeInstanceTypes(ctx(t), "nope"); !client.IsInvalid(err) || client.InvalidField(err) != "names" {
		t.Errorf("unknown type: %v", err)
	}
	if _, err := c.DescribeImages(ctx(t), "sim-custom"); err != nil {
		t.Errorf("DescribeImages: %v", err)
	}

	bad := filepath.Join(dir, "bad.yaml")
	_ = os.WriteFile(bad, []byte("instanceTypes:\n- name: broken\n  vcpus: 4\n"), 0o600)
	if _, err := server.New(server.Options{StateDir: dir, CatalogueFile: bad}); err == nil {
		t.Errorf("catalogue with an unknown field was accepted")
	}
}

func TestNewRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "192.0.2.1:80", ":8080"} {
		if _, err := server.New(server.Options{StateDir: t.TempDir(), Addr: addr}); err == nil {
			t.Errorf("listen address %s accepted", addr)
		}
	}
	if _, err := server.New(server.Options{StateDir: t.TempDir(), Addr: "[::1]:0"}); err != nil {
		t.Errorf("::1 refused: %v", err)
	}
}

func TestClientHonoursContext(t *testing.T) {
	_, c := start(t, server.Options{})
	if _, err := c.CreateFault(ctx(t), api.Fault{Kind: api.FaultLatency, Operation: api.OpDescribeRegions, LatencyMillis: 10_000}); err != nil {
		t.Fatal(err)
	}
	cx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, err := c.DescribeRegions(cx)
	if err == nil || !strings.Contains(err.Error(), context.DeadlineExceeded.Error()) {
		t.Errorf("DescribeRegions under a 200ms deadline: %v", err)
	}
	if d := time.Since(began); d > 2*time.Second {
		t.Errorf("call took %s despite the deadline", d)
	}

	// Cancellation while waiting between retries.
	if _, err := c.ClearFaults(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateFault(ctx(t), api.Fault{Kind: api.FaultError, Operation: api.OpDescribeRegions}); err != nil {
		t.Fatal(err)
	}
	slow, _ := client.New(c.URL(), client.Options{MinBackoff: 5 * time.Second, MaxBackoff: 5 * time.Second})
	cx2, cancel2 := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel2)
	began = time.Now()
	if _, err := slow.DescribeRegions(cx2); err == nil || !strings.Contains(err.Error(), context.Canceled.Error()) {
		t.Errorf("cancelled during backoff: %v", err)
	}
	if d := time.Since(began); d > 2*time.Second {
		t.Errorf("cancelled call took %s", d)
	}
}
