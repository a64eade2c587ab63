package cli

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// TestCloudCommandEC2 pastes the export line machina cloud prints into an AWS SDK client,
// launches an instance through EC2 and finds it with machina cloud instances.
func TestCloudCommandEC2(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	cmd := NewRootCommand()
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"cloud", "--listen", "127.0.0.1:0", "--state-dir", t.TempDir(), "--pending-delay", "0"})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	exportRE := regexp.MustCompile(`(?m)^export (AWS_ACCESS_KEY_ID=\S+ .*AWS_ENDPOINT_URL_EC2=\S+.*)$`)
	urlRE := regexp.MustCompile(`serving (http://127\.0\.0\.1:\d+)`)
	var line []string
	deadline := time.Now().Add(10 * time.Second)
	for line == nil {
		if m := exportRE.FindStringSubmatch(out.String()); m != nil && urlRE.MatchString(out.String()) {
			line = strings.Fields(m[1])
		} else if time.Now().After(deadline) {
			t.Fatalf("machina cloud printed no export line:\n%s", out.String())
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	env := map[string]string{}
	for _, kv := range line {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	for _, k := range []string{"AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL_STS", "AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING_V2"} {
		if env[k] == "" {
			t.Errorf("the export line lacks %s: %v", k, line)
		}
	}
	if env["AWS_DEFAULT_REGION"] != env["AWS_REGION"] { // the aws CLI v1 reads only the former
		t.Errorf("AWS_DEFAULT_REGION %q differs from AWS_REGION %q", env["AWS_DEFAULT_REGION"], env["AWS_REGION"])
	}
	c := awsec2.New(awsec2.Options{Region: env["AWS_REGION"], BaseEndpoint: aws.String(env["AWS_ENDPOINT_URL_EC2"]),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: env["AWS_ACCESS_KEY_ID"], SecretAccessKey: env["AWS_SECRET_ACCESS_KEY"]}, nil
		})})
	run, err := c.RunInstances(ctx, &awsec2.RunInstancesInput{ImageId: aws.String("ami-0a8f3c6e2b1d94f57"), InstanceType: types.InstanceTypeM6iLarge,
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1), TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeInstance,
			Tags: []types.Tag{{Key: aws.String("pool"), Value: aws.String("ec2")}}}}})
	if err != nil {
		t.Fatalf("RunInstances with the printed settings: %v", err)
	}
	id := aws.ToString(run.Instances[0].InstanceId)
	url := urlRE.FindStringSubmatch(out.String())[1]
	if got := machina(t, "cloud", "instances", "--url", url, "--tag", "pool=ec2"); !strings.Contains(got, id) {
		t.Errorf("machina cloud instances does not list the EC2 instance %s:\n%s", id, got)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("machina cloud returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("machina cloud did not stop when its context ended")
	}
}
