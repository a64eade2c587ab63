package awsactuator

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/machina-dev/machina/internal/cloud/cloudtest"
	ec2front "github.com/machina-dev/machina/internal/cloud/ec2"
	"github.com/machina-dev/machina/internal/controllers/machineapi/machine"
	"github.com/machina-dev/machina/internal/demo"
)

// A launch EC2 refuses for an ID the lookups memo remembered (a security group replaced
// since the lookup) is tried once more with fresh lookups and succeeds; a providerSpec EC2
// refuses with nothing remembered fails the Machine after one launch. Against the simulated
// cloud's EC2 front, with the memo's security-group answer made stale by hand.
func TestLaunchLooksUpAfreshWhenRefused(t *testing.T) {
	ctx := context.Background()
	cloud := cloudtest.Start(t, cloudtest.WithEC2(ec2front.Options{}))
	a := &Actuator{Config: Config{EC2Endpoint: cloud.Server.EC2().URL(),
		Credentials: credentials.NewStaticCredentialsProvider(ec2front.LabAccessKeyID, ec2front.LabSecretAccessKey, "")}}
	c, err := newClientCache(a.Config).Get(ctx, cloud.Server.EC2().Region(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ms := demo.DefaultAWSCluster("openshift-machine-api", "openshift-cluster-api", nil).MachineSet("w", "us-east-1a", 0)
	ps := &machinev1beta1.AWSMachineProviderConfig{}
	if err := json.Unmarshal(ms.Spec.Template.Spec.ProviderSpec.Value.Raw, ps); err != nil {
		t.Fatal(err)
	}
	tg := &target{ps: ps, cluster: cluster{region: c.region, infraName: "lab", tags: map[string]string{}}, c: c}
	newMachine := func(uid string) *machinev1beta1.Machine {
		return &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "openshift-machine-api", UID: k8stypes.UID("uid-" + uid)}}
	}

	// Warm the memo, then make its security-group answer name a group that does not exist.
	if _, err := a.resolve(ctx, newMachine("warm"), c, ps); err != nil {
		t.Fatal(err)
	}
	stale := 0
	for _, k := range c.lookups.cache.Keys() {
		if key, _ := k.(string); strings.HasPrefix(key, "DescribeSecurityGroups ") {
			c.lookups.cache.Add(key, &ec2.DescribeSecurityGroupsOutput{
				SecurityGroups: []ec2types.SecurityGroup{{GroupId: aws.String("sg-0000000000000000f")}}}, lookupTTL)
			stale++
		}
	}
	if stale == 0 {
		t.Fatal("the providerSpec's security groups were not looked up through the memo")
	}
	runs := func() int64 { return cloud.Server.EC2().Calls()["RunInstances"] }
	before := runs()
	out, err := a.launch(ctx, newMachine("replaced-group"), tg, nil)
	if err != nil {
		t.Fatalf("launch with a stale remembered security group: %v", err)
	}
	if n := runs() - before; n != 2 {
		t.Errorf("%d RunInstances calls, want 2 (refused, then with fresh lookups)", n)
	}
	for _, g := range out.Instances[0].SecurityGroups {
		if aws.ToString(g.GroupId) == "sg-0000000000000000f" {
			t.Errorf("launched into the stale group: %+v", out.Instances[0].SecurityGroups)
		}
	}

	// A group EC2 does not know, named by ID, fails the Machine: after one launch when
	// nothing was remembered, after two when something was.
	c.lookups.forget()
	bad := *ps
	bad.SecurityGroups = []machinev1beta1.AWSResourceReference{{ID: aws.String("sg-0000000000000000f")}}
	bad.Subnet = machinev1beta1.AWSResourceReference{ID: aws.String("subnet-0b1c2d3e4f50617a1")}
	for _, tc := range []struct {
		name     string
		warm     bool
		launches int64
	}{{"bad-group", false, 1}, {"bad-group-warm", true, 2}} {
		if tc.warm {
			if _, err := a.resolve(ctx, newMachine(tc.name), c, ps); err != nil {
				t.Fatal(err)
			}
		}
		before := runs()
		_, err = a.launch(ctx, newMachine(tc.name), &target{ps: &bad, cluster: tg.cluster, c: c}, nil)
		var term *machine.TerminalError
		if !errors.As(err, &term) || !strings.Contains(err.Error(), "InvalidGroup.NotFound") {
			t.Errorf("%s: launch with an unknown group ID: %v, want InvalidConfiguration naming InvalidGroup.NotFound", tc.name, err)
		}
		if n := runs() - before; n != tc.launches {
			t.Errorf("%s: %d RunInstances calls, want %d", tc.name, n, tc.launches)
		}
	}
}
