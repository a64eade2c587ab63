package awsclient

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/cloudtest"
	ec2front "github.com/machina-dev/machina/internal/cloud/ec2"
)

// Every attempt of a client the cache builds is counted with AWS's error code: against the
// simulated cloud's EC2 front, a DescribeInstances throttled once is one RequestLimitExceeded
// and, the SDK retrying, one OK.
func TestAttemptsCounted(t *testing.T) {
	ctx := context.Background()
	cloud := cloudtest.Start(t, cloudtest.WithEC2(ec2front.Options{}))
	c := NewCache(Config{EC2Endpoint: cloud.Server.EC2().URL(),
		Credentials: credentials.NewStaticCredentialsProvider(ec2front.LabAccessKeyID, ec2front.LabSecretAccessKey, "")},
		func(cfg aws.Config) *ec2.Client {
			return ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = Endpoint(cloud.Server.EC2().URL()) })
		})
	client, err := c.Get(ctx, cloud.Server.EC2().Region(), nil)
	if err != nil {
		t.Fatal(err)
	}
	count := func(code string) float64 {
		return testutil.ToFloat64(awsRequestsTotal.WithLabelValues("EC2", "DescribeInstances", code))
	}
	ok0, throttled0 := count("OK"), count("RequestLimitExceeded")
	ft, err := api.ParseFaultSpec("throttle,op=DescribeInstances,count=1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cloud.Client.CreateFault(ctx, ft); err != nil {
		t.Fatal(err)
	}
	if _, err := client.DescribeInstances(ctx, &ec2.DescribeInstancesInput{}); err != nil {
		t.Fatalf("DescribeInstances (the second attempt should pass): %v", err)
	}
	if ok, throttled := count("OK")-ok0, count("RequestLimitExceeded")-throttled0; ok != 1 || throttled != 1 {
		t.Errorf("attempts counted: OK %v, RequestLimitExceeded %v; want 1 and 1", ok, throttled)
	}
}
