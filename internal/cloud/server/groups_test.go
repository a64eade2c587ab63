package server_test

import (
	"testing"
	"time"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/cloud/server"
)

func groupMembers(t *testing.T, c *client.Client, id string) []api.GroupInstance {
	t.Helper()
	g, err := c.GetScalingGroup(ctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	return g.Instances
}

func TestScalingGroups(t *testing.T) {
	s, c := start(t, server.Options{SweepInterval: 20 * time.Millisecond})
	req := api.CreateScalingGroupRequest{
		Name: "pool-a", Region: "sim-east-1", Zones: []string{"sim-east-1a", "sim-east-1b", "sim-east-1c"},
		DesiredCapacity: 3,
		LaunchTemplate:  api.LaunchTemplate{InstanceType: "s1.medium", Image: "sim-rhcos-9", Tags: map[string]string{"pool": "a"}},
		Tags:            map[string]string{"cluster": "x"},
	}
	out, err := c.CreateScalingGroup(ctx(t), req)
	if err != nil || !out.Created {
		t.Fatalf("CreateScalingGroup: %+v, %v", out, err)
	}
	g := out.ScalingGroup
	if len(g.Instances) != 3 {
		t.Fatalf("group has %d instances, want 3", len(g.Instances))
	}
	zones := map[string]int{}
	for _, m := range g.Instances {
		zones[m.Zone]++
		if m.LaunchTemplateVersion != 1 || m.Health != api.HealthHealthy {
			t.Errorf("member %+v", m)
		}
	}
	if len(zones) != 3 {
		t.Errorf("members not spread over zones: %v", zones)
	}
	tagged, _ := c.DescribeInstances(ctx(t), api.DescribeInstancesRequest{Tags: map[string]string{"pool": "a", "cluster": "x"}, ScalingGroupID: g.ScalingGroupID})
	if len(tagged) != 3 {
		t.Errorf("%d instances carry the template and group tags", len(tagged))
	}
	// Idempotent by name; a different spec under the same name is refused.
	again, err := c.CreateScalingGroup(ctx(t), req)
	if err != nil || again.Created || again.ScalingGroup.ScalingGroupID != g.ScalingGroupID {
		t.Errorf("repeated create: %+v, %v", again, err)
	}
	req2 := req
	req2.DesiredCapacity = 9
	if _, err := c.CreateScalingGroup(ctx(t), req2); !client.HasCode(err, api.CodeAlreadyExists) {
		t.Errorf("create with a taken name: %v", err)
	}

	// Scale out, with the launch template changed: new members use version 2.
	five := 5
	up, err := c.UpdateScalingGroup(ctx(t), api.UpdateScalingGroupRequest{ScalingGroupID: g.ScalingGroupID, DesiredCapacity: &five,
		LaunchTemplate: &api.LaunchTemplate{InstanceType: "s1.large", Image: "sim-rhcos-9", Tags: map[string]string{"pool": "a"}}})
	if err != nil || len(up.Instances) != 5 || up.LaunchTemplateVersion != 2 {
		t.Fatalf("scale out: %+v, %v", up, err)
	}
	if up.Instances[4].LaunchTemplateVersion != 2 || up.Instances[0].LaunchTemplateVersion != 1 {
		t.Errorf("template versions: %+v", up.Instances)
	}

	// A killed member is replaced by the sweep.
	victim := up.Instances[0].InstanceID
	if _, err := c.KillInstances(ctx(t), api.KillInstancesRequest{InstanceIDs: []string{victim}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "replacement of a killed member", func() (bool, error) {
		m := groupMembers(t, c, g.ScalingGroupID)
		for _, x := range m {
			if x.InstanceID == victim {
				return false, nil
			}
		}
		return len(m) == 5, nil
	})

	// An unhealthy member is terminated and replaced at once.
	sick := groupMembers(t, c, g.ScalingGroupID)[0].InstanceID
	if err := c.SetInstanceHealth(ctx(t), sick, api.HealthUnhealthy); err != nil {
		t.Fatal(err)
	}
	if i, _ := c.GetInstance(ctx(t), sick); i.State != api.StateTerminated || i.StateReason != api.ReasonUnhealthyInGroup {
		t.Errorf("unhealthy member: %+v", i)
	}
	if m := groupMembers(t, c, g.ScalingGroupID); len(m) != 5 {
		t.Errorf("%d members after unhealthy replacement", len(m))
	}

	// Terminate one member and shrink the group.
	one := groupMembers(t, c, g.ScalingGroupID)[1].InstanceID
	res, err := c.TerminateInstanceInScalingGroup(ctx(t), one, true)
	if err != nil || res.ScalingGroup.DesiredCapacity != 4 || len(res.ScalingGroup.Instances) != 4 || res.Change.InstanceID != one {
		t.Fatalf("terminate in group: %+v, %v", res, err)
	}
	if _, err := c.TerminateInstanceInScalingGroup(ctx(t), mustRun(t, c, runReq(nil)).InstanceID, true); !client.HasCode(err, api.CodeNotInScalingGroup) {
		t.Errorf("terminate non-member: %v", err)
	}

	// Capacity in one zone: launches go to the others.
	if _, err := c.CreateFault(ctx(t), api.Fault{Kind: api.FaultCapacity, Zone: "sim-east-1a"}); err != nil {
		t.Fatal(err)
	}
	eight := 8
	up, err = c.UpdateScalingGroup(ctx(t), api.UpdateScalingGroupRequest{ScalingGroupID: g.ScalingGroupID, DesiredCapacity: &eight})
	if err != nil || len(up.Instances) != 8 {
		t.Fatalf("scale out under a capacity fault: %+v, %v", up, err)
	}
	// Every zone blocked: the group records why it is short.
	_, _ = c.CreateFault(ctx(t), api.Fault{Kind: api.FaultCapacity, InstanceType: "s1.large"})
	ten := 10
	up, err = c.UpdateScalingGroup(ctx(t), api.UpdateScalingGroupRequest{ScalingGroupID: g.ScalingGroupID, DesiredCapacity: &ten})
	if err != nil || len(up.Instances) != 8 || up.LastActivity == "" {
		t.Errorf("scale out without capacity: %d instances, activity %q, %v", len(up.Instances), up.LastActivity, err)
	}
	_, _ = c.ClearFaults(ctx(t))
	eventually(t, 5*time.Second, "catch-up after capacity returns", func() (bool, error) {
		return len(groupMembers(t, c, g.ScalingGroupID)) == 10, nil
	})

	// Scale in: newest first.
	two := 2
	before := groupMembers(t, c, g.ScalingGroupID)
	up, err = c.UpdateScalingGroup(ctx(t), api.UpdateScalingGroupRequest{ScalingGroupID: g.ScalingGroupID, DesiredCapacity: &two})
	if err != nil || len(up.Instances) != 2 || up.Instances[0].InstanceID != before[0].InstanceID || up.LastActivity != "" {
		t.Fatalf("scale in: %+v, %v", up, err)
	}

	if err := c.DeleteScalingGroup(ctx(t), g.ScalingGroupID); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteScalingGroup(ctx(t), g.ScalingGroupID); err != nil {
		t.Errorf("second delete: %v", err)
	}
	alive, _ := c.DescribeInstances(ctx(t), api.DescribeInstancesRequest{ScalingGroupID: g.ScalingGroupID, States: []api.InstanceState{api.StatePending, api.StateRunning}})
	if len(alive) != 0 {
		t.Errorf("%d group instances alive after delete", len(alive))
	}
	if _, err := c.GetScalingGroup(ctx(t), g.ScalingGroupID); !client.IsNotFound(err) {
		t.Errorf("deleted group: %v", err)
	}
	if st := s.Stats(); st.InstancesLaunchedByGroups < 13 {
		t.Errorf("launched by groups = %d", st.InstancesLaunchedByGroups)
	}
}

func TestScalingGroupSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	s1, c1 := start(t, server.Options{StateDir: dir})
	out, err := c1.CreateScalingGroup(ctx(t), api.CreateScalingGroupRequest{
		Name: "p", Region: "sim-west-1", Zones: []string{"sim-west-1a"}, DesiredCapacity: 2,
		LaunchTemplate: api.LaunchTemplate{InstanceType: "a1.large", Image: "sim-ubuntu-24.04-arm64"},
	})
	if err != nil {
		t.Fatal(err)
	}
	s1.Close()
	_, c2 := start(t, server.Options{StateDir: dir})
	m := groupMembers(t, c2, out.ScalingGroup.ScalingGroupID)
	if len(m) != 2 || m[0].InstanceID != out.ScalingGroup.Instances[0].InstanceID {
		t.Errorf("members after restart: %+v", m)
	}
}

// A group that launched everything it missed but met a capacity fault in one zone on the way
// records that; once it is scaled in it misses nothing, and the record goes, though the fault
// is still there (the failure that made TestScalingGroups flaky: a catch-up pass that ran
// while faults were being cleared left its record behind a scale-in).
func TestScalingGroupScaleInClearsActivity(t *testing.T) {
	_, c := start(t, server.Options{SweepInterval: time.Hour})
	if _, err := c.CreateFault(ctx(t), api.Fault{Kind: api.FaultCapacity, Zone: "sim-east-1a"}); err != nil {
		t.Fatal(err)
	}
	out, err := c.CreateScalingGroup(ctx(t), api.CreateScalingGroupRequest{
		Name: "pool-b", Region: "sim-east-1", Zones: []string{"sim-east-1a", "sim-east-1b"}, DesiredCapacity: 2,
		LaunchTemplate: api.LaunchTemplate{InstanceType: "s1.medium", Image: "sim-rhcos-9"},
	})
	if err != nil || len(out.ScalingGroup.Instances) != 2 || out.ScalingGroup.LastActivity == "" {
		t.Fatalf("create beside a zone without capacity: %+v, %v; want 2 instances and the zone's failure recorded", out, err)
	}
	one := 1
	up, err := c.UpdateScalingGroup(ctx(t), api.UpdateScalingGroupRequest{ScalingGroupID: out.ScalingGroup.ScalingGroupID, DesiredCapacity: &one})
	if err != nil || len(up.Instances) != 1 || up.LastActivity != "" {
		t.Fatalf("scale in: %d instances, activity %q, %v; want 1 and no activity", len(up.Instances), up.LastActivity, err)
	}
}
