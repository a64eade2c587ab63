package ec2_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/cloudtest"
	"github.com/machina-dev/machina/internal/cloud/ec2"
)

type wireError struct {
	Code      string `xml:"Errors>Error>Code"`
	Message   string `xml:"Errors>Error>Message"`
	RequestID string `xml:"RequestID"`
}

// raw posts a form to the front, signed with the SDK's signer unless secret is empty, and
// returns the status and the parsed EC2 error body.
func (e *env) raw(form url.Values, secret string, tamper func(*http.Request)) (int, wireError, string) {
	e.t.Helper()
	body := form.Encode()
	req, err := http.NewRequest(http.MethodPost, e.url+"/", strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	if secret != "" {
		sum := sha256.Sum256([]byte(body))
		err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: ec2.LabAccessKeyID, SecretAccessKey: secret},
			req, hex.EncodeToString(sum[:]), "ec2", region, time.Now())
		if err != nil {
			e.t.Fatal(err)
		}
	}
	if tamper != nil {
		tamper(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	var we wireError
	if resp.StatusCode != http.StatusOK {
		if err := xml.Unmarshal(b, &we); err != nil {
			e.t.Fatalf("error body is not EC2 error XML: %v\n%s", err, b)
		}
	}
	return resp.StatusCode, we, string(b)
}

func form(kv ...string) url.Values {
	v := url.Values{"Version": {"2016-11-15"}}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

// TestProtocolErrors sends requests no SDK would send: each answers EC2's error XML with a
// 4xx status, a request ID and a message naming what is wrong.
func TestProtocolErrors(t *testing.T) {
	e := start(t)
	run := []string{"Action", "RunInstances", "ImageId", rhcosAMI, "InstanceType", "m6i.large", "MinCount", "1", "MaxCount", "1"}
	for _, c := range []struct {
		name   string
		form   url.Values
		secret string
		tamper func(*http.Request)
		status int
		code   string
		names  string
	}{
		{"unknown action", form("Action", "LaunchRockets"), ec2.LabSecretAccessKey, nil, 400, "InvalidAction", "LaunchRockets"},
		{"no action", form(), ec2.LabSecretAccessKey, nil, 400, "MissingAction", "Action"},
		{"old version", form("Action", "DescribeInstances", "Version", "2014-01-01"), ec2.LabSecretAccessKey, nil, 400, "InvalidParameterValue", "2014-01-01"},
		{"unknown parameter", form(slices.Concat(run, []string{"Colour", "blue"})...), ec2.LabSecretAccessKey, nil, 400, "UnknownParameter", "Colour"},
		{"malformed count", form(slices.Concat(run[:6:6], []string{"MinCount", "one", "MaxCount", "1"})...), ec2.LabSecretAccessKey, nil, 400, "InvalidParameterValue", "MinCount"},
		{"min above max", form(slices.Concat(run[:6:6], []string{"MinCount", "3", "MaxCount", "2"})...), ec2.LabSecretAccessKey, nil, 400, "InvalidParameterValue", "MinCount"},
		{"bad user data", form(slices.Concat(run, []string{"UserData", "%%%"})...), ec2.LabSecretAccessKey, nil, 400, "InvalidParameterValue", "UserData"},
		{"bad tenancy", form(slices.Concat(run, []string{"Placement.Tenancy", "shared"})...), ec2.LabSecretAccessKey, nil, 400, "InvalidParameterValue", "Placement.Tenancy"},
		{"bad hop limit", form(slices.Concat(run, []string{"MetadataOptions.HttpPutResponseHopLimit", "0"})...), ec2.LabSecretAccessKey, nil, 400, "InvalidParameterValue", "MetadataOptions.HttpPutResponseHopLimit"},
		{"kms without encryption", form(slices.Concat(run, []string{"BlockDeviceMapping.1.DeviceName", "/dev/xvda", "BlockDeviceMapping.1.Ebs.KmsKeyId", "alias/x"})...), ec2.LabSecretAccessKey, nil, 400, "InvalidParameterDependency", "BlockDeviceMapping.1.Ebs.KmsKeyId"},
		{"too many cores", form(slices.Concat(run, []string{"CpuOptions.CoreCount", "2", "CpuOptions.ThreadsPerCore", "2", "InstanceType", "m6i.large"})...), ec2.LabSecretAccessKey, nil, 400, "InvalidParameterValue", "CpuOptions"},
		{"bad filter", form("Action", "DescribeSubnets", "Filter.1.Name", "size"), ec2.LabSecretAccessKey, nil, 400, "InvalidParameterValue", "Filter.1.Name"},
		{"dry run", form(slices.Concat(run, []string{"DryRun", "true"})...), ec2.LabSecretAccessKey, nil, 412, "DryRunOperation", "DryRun"},
		{"unsigned", form("Action", "DescribeInstances"), "", nil, 401, "AuthFailure", "AWS4-HMAC-SHA256"},
		{"wrong secret", form("Action", "DescribeInstances"), "not-the-secret", nil, 401, "AuthFailure", "signature does not match"},
		{"body changed after signing", form("Action", "DescribeInstances"), ec2.LabSecretAccessKey, func(r *http.Request) {
			b := "Action=TerminateInstances&InstanceId.1=i-0123456789abcdef0&Version=2016-11-15"
			r.Body, r.ContentLength = io.NopCloser(strings.NewReader(b)), int64(len(b))
			r.Header.Del("X-Amz-Content-Sha256")
		}, 401, "AuthFailure", "signature"},
		{"old signature", form("Action", "DescribeInstances"), ec2.LabSecretAccessKey, func(r *http.Request) {
			sum := sha256.Sum256([]byte(form("Action", "DescribeInstances").Encode()))
			_ = v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: ec2.LabAccessKeyID, SecretAccessKey: ec2.LabSecretAccessKey},
				r, hex.EncodeToString(sum[:]), "ec2", region, time.Now().Add(-time.Hour))
		}, 401, "AuthFailure", "expired"},
		{"GET", form("Action", "DescribeInstances"), ec2.LabSecretAccessKey, func(r *http.Request) { r.Method = http.MethodGet }, 405, "InvalidHttpRequest", "GET"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, we, body := e.raw(c.form, c.secret, c.tamper)
			if status != c.status || we.Code != c.code || !strings.Contains(we.Message, c.names) || we.RequestID == "" {
				t.Errorf("got %d %+v, want %d %s naming %q\n%s", status, we, c.status, c.code, c.names, body)
			}
		})
	}
	l, err := e.cloud.Client.DescribeInstances(ctx(t), api.DescribeInstancesRequest{})
	if err != nil || len(l) != 0 {
		t.Errorf("no request may have launched anything: %v, %v", l, err)
	}
}

// TestSuccessXML checks the raw answer of a call: EC2's namespace and a request ID.
func TestSuccessXML(t *testing.T) {
	e := start(t)
	status, _, body := e.raw(form("Action", "DescribeVpcs"), ec2.LabSecretAccessKey, nil)
	if status != 200 || !strings.Contains(body, `<DescribeVpcsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>`) ||
		!strings.Contains(body, "<vpcSet><item><vpcId>"+vpcID+"</vpcId>") {
		t.Errorf("%d\n%s", status, body)
	}
}

// TestCredentials: only the configured key pairs are accepted, for the endpoint's region,
// and a read-only pair may describe but not change anything.
func TestCredentials(t *testing.T) {
	e := start(t, cloudtest.WithEC2(ec2.Options{Credentials: []ec2.Credential{
		{AccessKeyID: "AKIAEXAMPLEWRITER001", SecretAccessKey: "writer-secret"},
		{AccessKeyID: "AKIAEXAMPLEREADER001", SecretAccessKey: "reader-secret", ReadOnly: true},
	}}))
	_, err := e.ec2.DescribeInstances(ctx(t), &awsec2.DescribeInstancesInput{})
	wantCode(t, err, "AuthFailure", ec2.LabAccessKeyID)

	writer := e.client("AKIAEXAMPLEWRITER001", "writer-secret")
	if _, err := writer.RunInstances(ctx(t), runInput(nil)); err != nil {
		t.Fatalf("writer: %v", err)
	}
	reader := e.client("AKIAEXAMPLEREADER001", "reader-secret")
	out, err := reader.DescribeInstances(ctx(t), &awsec2.DescribeInstancesInput{})
	if err != nil || len(out.Reservations) != 1 {
		t.Fatalf("reader describe: %+v, %v", out, err)
	}
	_, err = reader.RunInstances(ctx(t), runInput(nil))
	wantCode(t, err, "UnauthorizedOperation", "RunInstances")
	_, err = e.client("AKIAEXAMPLEWRITER001", "wrong").DescribeInstances(ctx(t), &awsec2.DescribeInstancesInput{})
	wantCode(t, err, "AuthFailure", "signature")

	west := awsec2.New(awsec2.Options{Region: "us-west-2", BaseEndpoint: aws.String(e.url),
		Credentials: creds("AKIAEXAMPLEWRITER001", "writer-secret"), Retryer: retryer()})
	_, err = west.DescribeInstances(ctx(t), &awsec2.DescribeInstancesInput{})
	wantCode(t, err, "AuthFailure", "us-west-2")
}

// TestMalformedThroughSDK: values an SDK lets through are refused naming the parameter.
func TestMalformedThroughSDK(t *testing.T) {
	e := start(t)
	for _, c := range []struct {
		name  string
		edit  func(*awsec2.RunInstancesInput)
		code  string
		names string
	}{
		{"unknown AMI", func(in *awsec2.RunInstancesInput) { in.ImageId = aws.String("ami-0000000000000000f") }, "InvalidAMIID.NotFound", "ami-0000000000000000f"},
		{"malformed AMI", func(in *awsec2.RunInstancesInput) { in.ImageId = aws.String("rhcos") }, "InvalidAMIID.Malformed", "rhcos"},
		{"unknown subnet", func(in *awsec2.RunInstancesInput) { in.SubnetId = aws.String("subnet-0000000000000000f") }, "InvalidSubnetID.NotFound", "SubnetId"},
		{"unknown group", func(in *awsec2.RunInstancesInput) { in.SecurityGroupIds = []string{"sg-0000000000000000f"} }, "InvalidGroup.NotFound", "SecurityGroupId.1"},
		{"unknown type", func(in *awsec2.RunInstancesInput) { in.InstanceType = "z9.huge" }, "InvalidParameterValue", "InstanceType"},
		{"arm image on x86", func(in *awsec2.RunInstancesInput) { in.ImageId = aws.String("ami-07e1b4c9d2f3a6085") }, "InvalidParameterValue", "arm64"},
		{"zone of another subnet", func(in *awsec2.RunInstancesInput) {
			in.Placement = &types.Placement{AvailabilityZone: aws.String("us-east-1c")}
		}, "InvalidParameterCombination", "SubnetId"},
		{"subnet and interfaces", func(in *awsec2.RunInstancesInput) {
			in.NetworkInterfaces = []types.InstanceNetworkInterfaceSpecification{{DeviceIndex: aws.Int32(0)}}
		}, "InvalidParameterCombination", "subnet"},
		{"long token", func(in *awsec2.RunInstancesInput) { in.ClientToken = aws.String(strings.Repeat("x", 65)) }, "InvalidParameterValue", "ClientToken"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := runInput(nil)
			c.edit(in)
			_, err := e.ec2.RunInstances(ctx(t), in)
			wantCode(t, err, c.code, c.names)
		})
	}
}
