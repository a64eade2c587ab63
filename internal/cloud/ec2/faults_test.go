package ec2_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/cloudtest"
	"github.com/machina-dev/machina/internal/cloud/ec2"
	"github.com/machina-dev/machina/internal/cloud/server"
)

func (e *env) fault(f api.Fault) {
	e.t.Helper()
	if _, err := e.cloud.Client.CreateFault(ctx(e.t), f); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) opStats(op string) api.OperationStats {
	e.t.Helper()
	st, err := e.cloud.Client.Stats(ctx(e.t))
	if err != nil {
		e.t.Fatal(err)
	}
	return st.Operations[op]
}

// TestFaultsWithSDKRetryer: the cloud's faults reach the EC2 front, and the SDK's
// standard retryer treats them as it treats EC2's own errors.
func TestFaultsWithSDKRetryer(t *testing.T) {
	e := start(t)

	t.Run("throttling is RequestLimitExceeded and retried", func(t *testing.T) {
		e.fault(api.Fault{Kind: api.FaultThrottle, Operation: "DescribeInstances", Count: 2})
		before := e.opStats("DescribeInstances")
		if _, err := e.ec2.DescribeInstances(ctx(t), &awsec2.DescribeInstancesInput{}); err != nil {
			t.Fatalf("the retryer should have got through two throttles: %v", err)
		}
		after := e.opStats("DescribeInstances")
		if after.Throttled-before.Throttled != 2 || after.Calls-before.Calls != 3 {
			t.Errorf("throttled %d, calls %d; want 2 throttled of 3 calls", after.Throttled-before.Throttled, after.Calls-before.Calls)
		}
	})

	t.Run("persistent throttling surfaces after the retries", func(t *testing.T) {
		e.fault(api.Fault{Kind: api.FaultThrottle, Operation: "DescribeSubnets"})
		_, err := e.ec2.DescribeSubnets(ctx(t), &awsec2.DescribeSubnetsInput{})
		wantCode(t, err, "RequestLimitExceeded")
		if c := e.opStats("DescribeSubnets").Calls; c != int64(retry.DefaultMaxAttempts) {
			t.Errorf("%d calls, want the retryer's %d attempts", c, retry.DefaultMaxAttempts)
		}
	})

	t.Run("an injected error is retried with the same client token", func(t *testing.T) {
		e.fault(api.Fault{Kind: api.FaultError, Operation: "RunInstances", Count: 1})
		in := runInput(nil)
		in.ClientToken = nil // the SDK fills in one idempotency token for all attempts
		if _, err := e.ec2.RunInstances(ctx(t), in); err != nil {
			t.Fatal(err)
		}
		if o := e.opStats("RunInstances"); o.Injected != 1 {
			t.Errorf("injected = %d", o.Injected)
		}
	})

	t.Run("insufficient capacity surfaces", func(t *testing.T) {
		e.fault(api.Fault{Kind: api.FaultCapacity, Zone: "us-east-1b"})
		in := runInput(nil)
		in.SubnetId = aws.String(privateB)
		_, err := e.ec2.RunInstances(ctx(t), in)
		wantCode(t, err, "InsufficientInstanceCapacity", "us-east-1b")
		if _, err := e.ec2.RunInstances(ctx(t), runInput(nil)); err != nil {
			t.Errorf("us-east-1a has capacity: %v", err)
		}
	})

	t.Run("faults scoped by tags and latency", func(t *testing.T) {
		e.fault(api.Fault{Kind: api.FaultError, Operation: "RunInstances", Tags: map[string]string{"pool": "a"}, StatusCode: 503})
		_, err := e.ec2.RunInstances(ctx(t), runInput(map[string]string{"pool": "a"}))
		wantCode(t, err, "Unavailable")
		if _, err := e.ec2.RunInstances(ctx(t), runInput(map[string]string{"pool": "b"})); err != nil {
			t.Errorf("pool b is not faulted: %v", err)
		}
		e.fault(api.Fault{Kind: api.FaultLatency, Operation: "DescribeVpcs", LatencyMillis: 300, Count: 1})
		began := time.Now()
		if _, err := e.ec2.DescribeVpcs(ctx(t), &awsec2.DescribeVpcsInput{}); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(began); d < 300*time.Millisecond {
			t.Errorf("DescribeVpcs took %s despite 300ms of injected latency", d)
		}
	})

	t.Run("killed instances show terminated", func(t *testing.T) {
		id := aws.ToString(e.run(runInput(map[string]string{"doomed": "yes"}))[0].InstanceId)
		if _, err := e.cloud.Client.KillInstances(ctx(t), api.KillInstancesRequest{Tags: map[string]string{"doomed": "yes"}}); err != nil {
			t.Fatal(err)
		}
		i := e.describe(id)
		if i.State.Name != types.InstanceStateNameTerminated || aws.ToString(i.StateReason.Code) != api.ReasonInjectedKill {
			t.Errorf("after kill: %+v %+v", i.State, i.StateReason)
		}
	})
}

// TestRestartKeepsInstances: instances launched through EC2 and their attributes survive a
// restart of the cloud, and their client tokens still return them.
func TestRestartKeepsInstances(t *testing.T) {
	dir := t.TempDir()
	opts := func(o *server.Options) { o.StateDir = dir }
	e := start(t, cloudtest.WithOptions(opts))
	in := runInput(map[string]string{"Name": "survivor"})
	in.KeyName = aws.String("k")
	first := e.run(in)[0]
	if _, err := e.ec2.CreateTags(ctx(t), &awsec2.CreateTagsInput{Resources: []string{aws.ToString(first.InstanceId)},
		Tags: []types.Tag{{Key: aws.String("later"), Value: aws.String("1")}}}); err != nil {
		t.Fatal(err)
	}
	e.cloud.Server.Close()

	e2 := start(t, cloudtest.WithOptions(opts))
	got := e2.describe(aws.ToString(first.InstanceId))
	if aws.ToString(got.KeyName) != "k" || tagMap(got.Tags)["later"] != "1" || aws.ToString(got.PrivateIpAddress) != aws.ToString(first.PrivateIpAddress) ||
		aws.ToString(got.NetworkInterfaces[0].NetworkInterfaceId) != aws.ToString(first.NetworkInterfaces[0].NetworkInterfaceId) {
		t.Errorf("after restart: %+v", got)
	}
	again := e2.run(in)
	if aws.ToString(again[0].InstanceId) != aws.ToString(first.InstanceId) {
		t.Errorf("the token launched %s after the restart, want %s", aws.ToString(again[0].InstanceId), aws.ToString(first.InstanceId))
	}
	next := e2.run(runInput(nil))[0]
	if aws.ToString(next.PrivateIpAddress) == aws.ToString(first.PrivateIpAddress) {
		t.Errorf("address %s handed out twice", aws.ToString(next.PrivateIpAddress))
	}
}

// TestCatalogueFile replaces the network model by file and refuses an invalid one.
func TestCatalogueFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cat.yaml")
	if err := os.WriteFile(file, []byte(`
aws:
  region: us-east-1
  accountID: "111122223333"
  vpc: {id: vpc-0ffffffffffffffff, cidr: 172.16.0.0/16}
  subnets:
  - {id: subnet-0fffffffffffffff1, zone: us-east-1c, cidr: 172.16.4.0/24, tags: {Name: mine}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	e := start(t, cloudtest.WithOptions(func(o *server.Options) { o.CatalogueFile = file }))
	in := runInput(nil)
	in.SubnetId, in.SecurityGroupIds = nil, nil
	i := e.run(in)[0]
	if aws.ToString(i.SubnetId) != "subnet-0fffffffffffffff1" || aws.ToString(i.PrivateIpAddress) != "172.16.4.4" ||
		aws.ToString(i.PrivateDnsName) != "ip-172-16-4-4.ec2.internal" {
		t.Errorf("instance = %+v", i)
	}

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("aws: {region: us-east-1, accountID: \"1\", vpc: {id: vpc-1, cidr: 10.0.0.0/16}, subnets: [{id: s-1, zone: us-east-1a, cidr: 192.168.0.0/24}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := server.New(server.Options{StateDir: t.TempDir(), CatalogueFile: bad, EC2: &ec2.Options{}})
	if err == nil || !strings.Contains(err.Error(), "subnets[0]") {
		t.Errorf("invalid network: %v", err)
	}
}
