package ec2_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// TestPublicIP: an interface launched with AssociatePublicIpAddress gives the instance a
// stable public address and DNS name; one without does not.
func TestPublicIP(t *testing.T) {
	e := start(t)
	in := runInput(nil)
	in.SubnetId, in.SecurityGroupIds = nil, nil
	in.NetworkInterfaces = []types.InstanceNetworkInterfaceSpecification{{DeviceIndex: aws.Int32(0), SubnetId: aws.String(privateA),
		Groups: []string{nodeSG}, AssociatePublicIpAddress: aws.Bool(true)}}
	i := e.run(in)[0]
	ip := aws.ToString(i.PublicIpAddress)
	if !strings.HasPrefix(ip, "54.") || !strings.Contains(aws.ToString(i.PublicDnsName), strings.ReplaceAll(ip, ".", "-")) {
		t.Errorf("public address %q, DNS name %q", ip, aws.ToString(i.PublicDnsName))
	}
	if again := e.describe(aws.ToString(i.InstanceId)); aws.ToString(again.PublicIpAddress) != ip {
		t.Errorf("DescribeInstances says %q, RunInstances said %q", aws.ToString(again.PublicIpAddress), ip)
	}
	if plain := e.run(runInput(nil))[0]; plain.PublicIpAddress != nil {
		t.Errorf("an instance without AssociatePublicIpAddress has public address %q", aws.ToString(plain.PublicIpAddress))
	}
}
