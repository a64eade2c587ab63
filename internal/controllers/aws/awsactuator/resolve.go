package awsactuator

import (
	"context"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"

	"github.com/machina-dev/machina/internal/controllers/machineapi/machine"
)

// resolved are the providerSpec's references turned into IDs.
type resolved struct {
	ami        string
	rootDevice string // the AMI's root device name; "" when not looked up
	subnet     string // "" lets EC2 pick a subnet of placement.availabilityZone
	groups     []string
	// remembered: some reference was answered from the lookups memo, not from EC2.
	remembered bool
}

// resolve looks up what the providerSpec names by filters (and, where the launch needs
// more than the ID, by ID), through the clients' lookups memo. Nothing found is an
// InvalidConfiguration naming the field.
func (a *Actuator) resolve(ctx context.Context, m *machinev1beta1.Machine, c *clients, ps *machinev1beta1.AWSMachineProviderConfig) (*resolved, error) {
	r := &resolved{}
	var err error
	needRoot := slices.ContainsFunc(ps.BlockDevices, func(b machinev1beta1.BlockDeviceMappingSpec) bool { return b.DeviceName == nil })
	if r.ami, r.rootDevice, err = a.resolveAMI(ctx, m, c, ps.AMI, needRoot, &r.remembered); err != nil {
		return nil, err
	}
	needVPC := slices.ContainsFunc(ps.SecurityGroups, func(g machinev1beta1.AWSResourceReference) bool { return g.ID == nil })
	var vpc string
	if r.subnet, vpc, err = a.resolveSubnet(ctx, m, c, ps, needVPC, &r.remembered); err != nil {
		return nil, err
	}
	for i, g := range ps.SecurityGroups {
		if g.ID != nil {
			r.groups = append(r.groups, *g.ID)
			continue
		}
		ids, err := a.findGroups(ctx, m, c, g.Filters, vpc, &r.remembered)
		if err != nil {
			return nil, err
		}
		if len(ids) == 0 {
			return nil, machine.InvalidConfiguration("%s: Invalid value: %q: no security group matches (in %s)",
				specPath.Child("securityGroups").Index(i).Child("filters"), filterNames(g.Filters), vpcOrRegion(vpc, c.region))
		}
		r.groups = append(r.groups, ids...)
	}
	slices.Sort(r.groups)
	r.groups = slices.Compact(r.groups)
	return r, nil
}

func vpcOrRegion(vpc, region string) string {
	if vpc != "" {
		return "VPC " + vpc
	}
	return "region " + region
}

// resolveAMI returns the AMI's ID (the newest of those the filters match) and, with
// needRoot, its root device name.
func (a *Actuator) resolveAMI(ctx context.Context, m *machinev1beta1.Machine, c *clients, ref machinev1beta1.AWSResourceReference, needRoot bool, hit *bool) (string, string, error) {
	if ref.ID != nil && !needRoot {
		return *ref.ID, "", nil
	}
	in := &ec2.DescribeImagesInput{}
	if ref.ID != nil {
		in.ImageIds = []string{*ref.ID}
	} else {
		in.Filters = ec2Filters(ref.Filters)
	}
	out, err := remember(c.lookups, hit, "DescribeImages", in, func() (*ec2.DescribeImagesOutput, error) { return c.ec2.DescribeImages(ctx, in) },
		func(o *ec2.DescribeImagesOutput) bool { return len(o.Images) > 0 })
	if err != nil {
		return "", "", a.classify(m.UID, "looking up the AMI", specPath.Child("ami"), err)
	}
	if len(out.Images) == 0 {
		if ref.ID != nil {
			return "", "", machine.InvalidConfiguration("%s: Invalid value: %q: no such AMI", specPath.Child("ami", "id"), *ref.ID)
		}
		return "", "", machine.InvalidConfiguration("%s: Invalid value: %q: no AMI matches", specPath.Child("ami", "filters"), filterNames(ref.Filters))
	}
	newest := slices.MaxFunc(out.Images, func(x, y ec2types.Image) int {
		return strings.Compare(aws.ToString(x.CreationDate), aws.ToString(y.CreationDate))
	})
	return aws.ToString(newest.ImageId), aws.ToString(newest.RootDeviceName), nil
}

// resolveSubnet returns the subnet's ID and, when looked up, its VPC.
func (a *Actuator) resolveSubnet(ctx context.Context, m *machinev1beta1.Machine, c *clients, ps *machinev1beta1.AWSMachineProviderConfig, needVPC bool, hit *bool) (string, string, error) {
	ref := ps.Subnet
	id := aws.ToString(ref.ID)
	if ref.ARN != nil {
		id, _ = subnetIDFromARN(*ref.ARN) // checked by validate
	}
	if id == "" && len(ref.Filters) == 0 {
		return "", "", nil
	}
	if id != "" && !needVPC {
		return id, "", nil
	}
	in := &ec2.DescribeSubnetsInput{}
	if id != "" {
		in.SubnetIds = []string{id}
	} else {
		in.Filters = ec2Filters(ref.Filters)
		if z := ps.Placement.AvailabilityZone; z != "" {
			in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("availability-zone"), Values: []string{z}})
		}
	}
	out, err := remember(c.lookups, hit, "DescribeSubnets", in, func() (*ec2.DescribeSubnetsOutput, error) { return c.ec2.DescribeSubnets(ctx, in) },
		func(o *ec2.DescribeSubnetsOutput) bool { return len(o.Subnets) > 0 })
	if err != nil {
		return "", "", a.classify(m.UID, "looking up the subnet", specPath.Child("subnet"), err)
	}
	if len(out.Subnets) == 0 {
		if id != "" {
			return "", "", machine.InvalidConfiguration("%s: Invalid value: %q: no such subnet", specPath.Child("subnet"), id)
		}
		return "", "", machine.InvalidConfiguration("%s: Invalid value: %q: no subnet matches (zone %q)",
			specPath.Child("subnet", "filters"), filterNames(ref.Filters), ps.Placement.AvailabilityZone)
	}
	first := slices.MinFunc(out.Subnets, func(x, y ec2types.Subnet) int {
		return strings.Compare(aws.ToString(x.SubnetId), aws.ToString(y.SubnetId))
	})
	return aws.ToString(first.SubnetId), aws.ToString(first.VpcId), nil
}

// findGroups returns the IDs of the security groups the filters match (in vpc when known).
func (a *Actuator) findGroups(ctx context.Context, m *machinev1beta1.Machine, c *clients, fs []machinev1beta1.Filter, vpc string, hit *bool) ([]string, error) {
	in := &ec2.DescribeSecurityGroupsInput{Filters: ec2Filters(fs)}
	if vpc != "" {
		in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("vpc-id"), Values: []string{vpc}})
	}
	out, err := remember(c.lookups, hit, "DescribeSecurityGroups", in,
		func() (*ec2.DescribeSecurityGroupsOutput, error) { return c.ec2.DescribeSecurityGroups(ctx, in) },
		func(o *ec2.DescribeSecurityGroupsOutput) bool { return len(o.SecurityGroups) > 0 })
	if err != nil {
		return nil, a.classify(m.UID, "looking up security groups", specPath.Child("securityGroups"), err)
	}
	ids := make([]string, 0, len(out.SecurityGroups))
	for _, g := range out.SecurityGroups {
		ids = append(ids, aws.ToString(g.GroupId))
	}
	return ids, nil
}

func ec2Filters(fs []machinev1beta1.Filter) []ec2types.Filter {
	out := make([]ec2types.Filter, 0, len(fs))
	for _, f := range fs {
		out = append(out, ec2types.Filter{Name: aws.String(f.Name), Values: slices.Clone(f.Values)})
	}
	return out
}
