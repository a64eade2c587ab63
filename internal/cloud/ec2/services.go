package ec2

import (
	"fmt"
	"strings"
)

// The services of the front and their actions.
var (
	ec2Service   *service
	stsService   *service
	elbService   *service
	elbv2Service *service
)

func init() {
	ro := func(fn func(*Front, *call) (any, error)) action { return action{run: fn} }
	rw := func(fn func(*Front, *call) (any, error)) action { return action{run: fn, mutating: true} }
	ec2Service = &service{name: "ec2", version: "2016-11-15", ns: "http://ec2.amazonaws.com/doc/2016-11-15/", ec2: true,
		actions: map[string]action{
			"RunInstances":                    rw((*Front).runInstances),
			"DescribeInstances":               ro((*Front).describeInstances),
			"TerminateInstances":              rw((*Front).terminateInstances),
			"StopInstances":                   rw((*Front).stopInstances),
			"StartInstances":                  rw((*Front).startInstances),
			"CreateTags":                      rw(func(f *Front, c *call) (any, error) { return f.changeTags(c, true) }),
			"DeleteTags":                      rw(func(f *Front, c *call) (any, error) { return f.changeTags(c, false) }),
			"DescribeImages":                  ro((*Front).describeImages),
			"DescribeSubnets":                 ro((*Front).describeSubnets),
			"DescribeSecurityGroups":          ro((*Front).describeSecurityGroups),
			"DescribeVpcs":                    ro((*Front).describeVpcs),
			"DescribeDhcpOptions":             ro((*Front).describeDHCPOptions),
			"DescribeAvailabilityZones":       ro((*Front).describeAvailabilityZones),
			"DescribeInstanceTypes":           ro((*Front).describeInstanceTypes),
			"DescribeNetworkInterfaces":       ro((*Front).describeNetworkInterfaces),
			"ModifyNetworkInterfaceAttribute": rw((*Front).modifyNetworkInterfaceAttribute),
			"ModifyInstanceMetadataOptions":   rw((*Front).modifyInstanceMetadataOptions),
			"DescribeVolumes":                 ro((*Front).describeVolumes),
			"DescribeHosts":                   ro((*Front).describeHosts),
			"DescribeLaunchTemplateVersions":  ro((*Front).describeLaunchTemplateVersions),
		}}
	stsService = &service{name: "sts", version: "2011-06-15", ns: "https://sts.amazonaws.com/doc/2011-06-15/",
		actions: map[string]action{"GetCallerIdentity": ro((*Front).getCallerIdentity)}}
	elbService = &service{name: "elasticloadbalancing", version: "2012-06-01", ns: "http://elasticloadbalancing.amazonaws.com/doc/2012-06-01/",
		actions: map[string]action{
			"DescribeLoadBalancers":               ro((*Front).describeClassicLBs),
			"RegisterInstancesWithLoadBalancer":   rw(func(f *Front, c *call) (any, error) { return f.registerClassic(c, true) }),
			"DeregisterInstancesFromLoadBalancer": rw(func(f *Front, c *call) (any, error) { return f.registerClassic(c, false) }),
		}}
	elbv2Service = &service{name: "elasticloadbalancing", version: "2015-12-01", ns: "http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/",
		actions: map[string]action{
			"DescribeLoadBalancers": ro((*Front).describeNLBs),
			"DescribeTargetGroups":  ro((*Front).describeTargetGroups),
			"DescribeTargetHealth":  ro((*Front).describeTargetHealth),
			"RegisterTargets":       rw(func(f *Front, c *call) (any, error) { return f.registerTargets(c, true) }),
			"DeregisterTargets":     rw(func(f *Front, c *call) (any, error) { return f.registerTargets(c, false) }),
		}}
}

// ready refuses parameters the action did not read, then answers a dry run. Actions call
// it after parsing and before changing anything.
func (c *call) ready() error {
	dry, err := c.p.boolean("DryRun", false)
	if err != nil {
		return err
	}
	if err := c.p.unknown(); err != nil {
		return err
	}
	if dry {
		return errorf(412, "DryRunOperation", "Request would have succeeded, but DryRun flag is set.")
	}
	return nil
}

type callerIdentity struct {
	Arn     string `xml:"Arn"`
	UserID  string `xml:"UserId"`
	Account string `xml:"Account"`
}

func (f *Front) getCallerIdentity(c *call) (any, error) {
	if err := c.ready(); err != nil {
		return nil, err
	}
	if err := c.fault(f, nil, nil); err != nil {
		return nil, err
	}
	return &callerIdentity{Arn: fmt.Sprintf("arn:aws:iam::%s:user/%s", f.net.account, c.cred.UserName),
		UserID: "AIDA" + strings.ToUpper(strings.TrimPrefix(c.cred.AccessKeyID, "AKIA")), Account: f.net.account}, nil
}
