package awsactuator

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbv2types "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
)

// registerLoadBalancers registers a running instance with the providerSpec's load
// balancers (classic ones directly, network ones through each of their target groups),
// once: the providerStatus condition LoadBalancersRegistered records it for the instance.
func (a *Actuator) registerLoadBalancers(ctx context.Context, m *machinev1beta1.Machine, t *target, inst *ec2types.Instance) error {
	lbs := t.ps.LoadBalancers
	if len(lbs) == 0 || inst.State == nil || inst.State.Name != ec2types.InstanceStateNameRunning {
		return nil
	}
	id := aws.ToString(inst.InstanceId)
	done := "registered " + id + " with " + lbNames(lbs)
	if c := meta.FindStatusCondition(providerStatusOf(m).Conditions, ConditionLoadBalancers); c != nil && c.Status == "True" && c.Message == done {
		return nil
	}
	for _, lb := range lbs {
		if err := a.setRegistration(ctx, t.c, lb, id, true); err != nil {
			err = a.classify(m.UID, fmt.Sprintf("registering with %s load balancer %s", lb.Type, lb.Name), nil, err)
			setProviderCondition(m, ConditionLoadBalancers, false, reasonOf(err), err.Error())
			return err
		}
	}
	setProviderCondition(m, ConditionLoadBalancers, true, "Registered", done)
	return nil
}

// deregisterLoadBalancers takes the instance out of the providerSpec's load balancers
// before it is terminated. Load balancers or target groups that are gone are skipped.
func (a *Actuator) deregisterLoadBalancers(ctx context.Context, m *machinev1beta1.Machine, t *target, inst *ec2types.Instance) error {
	if len(t.ps.LoadBalancers) == 0 || gone(inst) {
		return nil
	}
	for _, lb := range t.ps.LoadBalancers {
		err := a.setRegistration(ctx, t.c, lb, aws.ToString(inst.InstanceId), false)
		if err != nil && !isLBGone(err) {
			return a.classify(m.UID, fmt.Sprintf("deregistering from %s load balancer %s", lb.Type, lb.Name), nil, err)
		}
	}
	setProviderCondition(m, ConditionLoadBalancers, false, "Deregistered", "deregistered from "+lbNames(t.ps.LoadBalancers))
	return nil
}

func (a *Actuator) setRegistration(ctx context.Context, c *clients, lb machinev1beta1.LoadBalancerReference, id string, register bool) error {
	if lb.Type == machinev1beta1.ClassicLoadBalancerType {
		ins := []elbtypes.Instance{{InstanceId: aws.String(id)}}
		var err error
		if register {
			_, err = c.elb.RegisterInstancesWithLoadBalancer(ctx, &elb.RegisterInstancesWithLoadBalancerInput{LoadBalancerName: aws.String(lb.Name), Instances: ins})
		} else {
			_, err = c.elb.DeregisterInstancesFromLoadBalancer(ctx, &elb.DeregisterInstancesFromLoadBalancerInput{LoadBalancerName: aws.String(lb.Name), Instances: ins})
		}
		return err
	}
	lbs, err := c.elbv2.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{Names: []string{lb.Name}})
	if err != nil {
		return err
	}
	for _, l := range lbs.LoadBalancers {
		tgs, err := c.elbv2.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{LoadBalancerArn: l.LoadBalancerArn})
		if err != nil {
			return err
		}
		for _, tg := range tgs.TargetGroups {
			targets := []elbv2types.TargetDescription{{Id: aws.String(id)}}
			if register {
				_, err = c.elbv2.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: tg.TargetGroupArn, Targets: targets})
			} else {
				_, err = c.elbv2.DeregisterTargets(ctx, &elbv2.DeregisterTargetsInput{TargetGroupArn: tg.TargetGroupArn, Targets: targets})
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func isLBGone(err error) bool {
	switch APIErrorCode(err) {
	case "LoadBalancerNotFound", "TargetGroupNotFound", "AccessPointNotFound", "InvalidTarget", "InvalidInstance":
		return true
	}
	return false
}

func lbNames(lbs []machinev1beta1.LoadBalancerReference) string {
	names := make([]string, len(lbs))
	for i, lb := range lbs {
		names[i] = string(lb.Type) + "/" + lb.Name
	}
	return strings.Join(names, ", ")
}
