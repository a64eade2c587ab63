package ec2_test

import (
	"testing"

	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/ec2"
)

// TestCallsCounted: the front counts every request it answers by action, retries of a
// throttled call and calls of the other services on its port included; requests refused
// before an action ran count as rejected.
func TestCallsCounted(t *testing.T) {
	e := start(t)
	front := e.cloud.Server.EC2()
	before := front.Calls()

	for range 2 {
		if _, err := e.ec2.DescribeInstances(ctx(t), &awsec2.DescribeInstancesInput{}); err != nil {
			t.Fatal(err)
		}
	}
	e.fault(api.Fault{Kind: api.FaultThrottle, Operation: "DescribeSubnets", Count: 1})
	if _, err := e.ec2.DescribeSubnets(ctx(t), &awsec2.DescribeSubnetsInput{}); err != nil {
		t.Fatalf("the retryer should have got through one throttle: %v", err)
	}
	if _, err := e.sts().GetCallerIdentity(ctx(t), &sts.GetCallerIdentityInput{}); err != nil {
		t.Fatal(err)
	}
	bad := e.client(ec2.LabAccessKeyID, "not-the-secret")
	if _, err := bad.DescribeInstances(ctx(t), &awsec2.DescribeInstancesInput{}); err == nil {
		t.Fatal("a wrong secret was accepted")
	}

	after := front.Calls()
	want := map[string]int64{"DescribeInstances": 2, "DescribeSubnets": 2, "GetCallerIdentity": 1, ec2.RejectedCall: 1}
	for action, n := range want {
		if got := after[action] - before[action]; got != n {
			t.Errorf("%s: %d calls counted, want %d (all counts: %v)", action, got, n, after)
		}
	}
	if got := ec2.TotalCalls(after) - ec2.TotalCalls(before); got != 6 {
		t.Errorf("%d calls in total, want 6 (all counts: %v)", got, after)
	}
}
