package ec2_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/cloudtest"
	"github.com/machina-dev/machina/internal/cloud/ec2"
)

const (
	region   = api.DefaultAWSRegion
	infra    = api.DefaultAWSInfraID
	rhcosAMI = "ami-0a8f3c6e2b1d94f57"
	vpcID    = "vpc-0a1b2c3d4e5f60718"
	nodeSG   = "sg-01a2b3c4d5e6f7081"
	// privateA is the private subnet of us-east-1a (10.0.128.0/20).
	privateA = "subnet-0b1c2d3e4f50617a1"
	privateB = "subnet-0b1c2d3e4f50617b1"
)

// env is a simulated cloud with its EC2 front and SDK clients pointed at it.
type env struct {
	t     testing.TB
	cloud *cloudtest.Cloud
	url   string
	ec2   *awsec2.Client
}

func start(t testing.TB, opts ...cloudtest.Option) *env {
	t.Helper()
	opts = append([]cloudtest.Option{cloudtest.WithEC2(ec2.Options{})}, opts...)
	c := cloudtest.Start(t, opts...)
	e := &env{t: t, cloud: c, url: c.Server.EC2().URL()}
	e.ec2 = e.client(ec2.LabAccessKeyID, ec2.LabSecretAccessKey)
	return e
}

func creds(id, secret string) aws.CredentialsProvider {
	return aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, Source: "test"}, nil
	})
}

// retryer is the SDK's standard retryer with short backoffs for tests.
func retryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxBackoff = 20 * time.Millisecond
	})
}

func (e *env) client(id, secret string) *awsec2.Client {
	return awsec2.New(awsec2.Options{Region: region, BaseEndpoint: aws.String(e.url), Credentials: creds(id, secret), Retryer: retryer()})
}

func (e *env) sts() *sts.Client {
	return sts.New(sts.Options{Region: region, BaseEndpoint: aws.String(e.url + ec2.PathSTS),
		Credentials: creds(ec2.LabAccessKeyID, ec2.LabSecretAccessKey), Retryer: retryer()})
}

func (e *env) elb() *elb.Client {
	return elb.New(elb.Options{Region: region, BaseEndpoint: aws.String(e.url + ec2.PathELB),
		Credentials: creds(ec2.LabAccessKeyID, ec2.LabSecretAccessKey), Retryer: retryer()})
}

func (e *env) elbv2() *elbv2.Client {
	return elbv2.New(elbv2.Options{Region: region, BaseEndpoint: aws.String(e.url + ec2.PathELBv2),
		Credentials: creds(ec2.LabAccessKeyID, ec2.LabSecretAccessKey), Retryer: retryer()})
}

func ctx(t testing.TB) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

var tokenSeq atomic.Int64

// runInput is a minimal valid RunInstances request with a fresh client token.
func runInput(tags map[string]string) *awsec2.RunInstancesInput {
	in := &awsec2.RunInstancesInput{
		ImageId: aws.String(rhcosAMI), InstanceType: types.InstanceTypeM6iXlarge,
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1), SubnetId: aws.String(privateA),
		SecurityGroupIds: []string{nodeSG},
		ClientToken:      aws.String(fmt.Sprintf("token-%d", tokenSeq.Add(1))),
	}
	if len(tags) > 0 {
		spec := types.TagSpecification{ResourceType: types.ResourceTypeInstance}
		for k, v := range tags {
			spec.Tags = append(spec.Tags, types.Tag{Key: aws.String(k), Value: aws.String(v)})
		}
		in.TagSpecifications = []types.TagSpecification{spec}
	}
	return in
}

func (e *env) run(in *awsec2.RunInstancesInput) []types.Instance {
	e.t.Helper()
	out, err := e.ec2.RunInstances(ctx(e.t), in)
	if err != nil {
		e.t.Fatalf("RunInstances: %v", err)
	}
	return out.Instances
}

func (e *env) describe(id string) types.Instance {
	e.t.Helper()
	out, err := e.ec2.DescribeInstances(ctx(e.t), &awsec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil || len(out.Reservations) != 1 || len(out.Reservations[0].Instances) != 1 {
		e.t.Fatalf("DescribeInstances %s: %+v, %v", id, out, err)
	}
	return out.Reservations[0].Instances[0]
}

// wantCode fails unless err is an API error with code whose message contains each of
// parts.
func wantCode(t testing.TB, err error, code string, parts ...string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("want API error %s, got %v", code, err)
	}
	if ae.ErrorCode() != code {
		t.Fatalf("code = %s (%s), want %s", ae.ErrorCode(), ae.ErrorMessage(), code)
	}
	for _, p := range parts {
		if !strings.Contains(ae.ErrorMessage(), p) {
			t.Errorf("message %q does not name %q", ae.ErrorMessage(), p)
		}
	}
}

func tagMap(l []types.Tag) map[string]string {
	out := map[string]string{}
	for _, t := range l {
		out[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return out
}

// eventually polls cond until it holds or 30s pass.
func eventually(t testing.TB, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s (last error: %v)", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
