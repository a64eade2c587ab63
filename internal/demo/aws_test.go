package demo

import (
	"encoding/json"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	capav1 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/convert/providers/aws"
)

// TestAWSClusterConverts: the AWS lab's Machine API objects convert to the Cluster API
// without errors or warnings, and what they name exists in the EC2 front's built-in
// catalogue.
func TestAWSClusterConverts(t *testing.T) {
	cl := DefaultAWSCluster("openshift-machine-api", "openshift-cluster-api", []byte("kubeconfig"))
	ctx, err := aws.NewContext(cl.Infrastructure())
	if err != nil {
		t.Fatal(err)
	}
	cat := api.DefaultAWSCatalogue()
	var sets int
	for _, o := range cl.WorkloadObjects(2) {
		switch o := o.(type) {
		case *machinev1beta1.MachineSet:
			sets++
			out, warns, errs := convert.ToClusterAPIMachineSet(o, ctx)
			if len(errs) > 0 || len(warns) > 0 {
				t.Fatalf("MachineSet %s: errors %v, warnings %v", o.Name, errs, warns)
			}
			spec := out.InfraMachineTemplate.(*capav1.AWSMachineTemplate).Spec.Template.Spec
			if spec.RootVolume == nil || spec.RootVolume.Size != 120 || spec.Subnet == nil || len(spec.AdditionalSecurityGroups) != 2 {
				t.Errorf("MachineSet %s converted to %+v", o.Name, spec)
			}
			checkInCatalogue(t, cat, o)
		case *machinev1beta1.MachineHealthCheck:
			if _, warns, errs := convert.ToClusterAPIMachineHealthCheck(o, ctx); len(errs) > 0 || len(warns) > 0 {
				t.Fatalf("MachineHealthCheck %s: errors %v, warnings %v", o.Name, errs, warns)
			}
		default:
			t.Errorf("unexpected workload object %T", o)
		}
	}
	if sets != 2 {
		t.Fatalf("%d MachineSets, want one per zone (2)", sets)
	}
	if names := cl.MachineSetNames(); names[0] != "lab-x7k2p-worker-us-east-1a" || names[1] != "lab-x7k2p-worker-us-east-1b" {
		t.Errorf("MachineSet names %v", names)
	}
}

// checkInCatalogue: the AMI, instance type, subnet and security groups a MachineSet names
// are in the catalogue (subnet and groups by their Name tags).
func checkInCatalogue(t *testing.T, cat api.Catalogue, ms *machinev1beta1.MachineSet) {
	t.Helper()
	var ps machinev1beta1.AWSMachineProviderConfig
	if err := json.Unmarshal(ms.Spec.Template.Spec.ProviderSpec.Value.Raw, &ps); err != nil {
		t.Fatal(err)
	}
	found := func(ok bool, what string) {
		if !ok {
			t.Errorf("MachineSet %s: %s is not in the EC2 front's catalogue", ms.Name, what)
		}
	}
	hasImage, hasType := false, false
	for _, im := range cat.Images {
		hasImage = hasImage || im.ImageID == *ps.AMI.ID
	}
	for _, it := range cat.InstanceTypes {
		hasType = hasType || it.Name == ps.InstanceType
	}
	found(hasImage, "AMI "+*ps.AMI.ID)
	found(hasType, "instance type "+ps.InstanceType)
	subnet := ps.Subnet.Filters[0].Values[0]
	hasSubnet := false
	for _, s := range cat.AWS.Subnets {
		hasSubnet = hasSubnet || (s.Tags["Name"] == subnet && s.Zone == ps.Placement.AvailabilityZone && !s.Public)
	}
	found(hasSubnet, "private subnet "+subnet+" in "+ps.Placement.AvailabilityZone)
	for _, g := range ps.SecurityGroups {
		name, hasGroup := g.Filters[0].Values[0], false
		for _, sg := range cat.AWS.SecurityGroups {
			hasGroup = hasGroup || sg.Tags["Name"] == name
		}
		found(hasGroup, "security group "+name)
	}
}
