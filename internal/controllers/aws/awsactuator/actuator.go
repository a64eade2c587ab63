// Package awsactuator is the Machine API actuator for Amazon EC2: it turns a Machine with an
// AWSMachineProviderConfig (machine.openshift.io/v1beta1) into an EC2 instance through
// aws-sdk-go-v2. The Machine's UID is the launch's ClientToken (and a tag on the instance),
// so no retry, crash or restart ever launches a second instance: a Machine whose provider
// ID was never stored finds its instance again by that token (DescribeInstances filter
// client-token).
//
// The region is the providerSpec's placement.region, else the cluster's Infrastructure
// (status.platformStatus.aws.region); credentials come from the providerSpec's
// credentialsSecret (keys aws_access_key_id, aws_secret_access_key), else from Config.
package awsactuator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/aws/awsclient"
	"github.com/machina-dev/machina/internal/controllers/machineapi/machine"
)

// Actuator implements machine.Actuator against EC2.
type Actuator struct {
	// Client reads the Infrastructure and the Machines' Secrets.
	Client client.Client
	// Config says how to reach AWS.
	Config Config

	once    sync.Once
	clients *awsclient.Cache[*clients]
	backoff backoffs
	// seen holds the instance Exists found for a Machine (by UID) for the Update or Delete
	// that follows it in the same pass, saving a second DescribeInstances.
	seen sync.Map
}

var _ machine.Actuator = &Actuator{}

// target is what every call about one Machine needs.
type target struct {
	ps      *machinev1beta1.AWSMachineProviderConfig
	cluster cluster
	c       *clients
}

// prepare decodes the providerSpec and builds the clients of the Machine's region and
// credentials.
func (a *Actuator) prepare(ctx context.Context, m *machinev1beta1.Machine) (*target, error) {
	a.once.Do(func() { a.clients = newClientCache(a.Config) })
	ps, err := ProviderSpec(m)
	if err != nil {
		return nil, err
	}
	cl, err := a.clusterOf(ctx, m, ps)
	if err != nil {
		return nil, err
	}
	creds, err := a.credentialsOf(ctx, m, ps)
	if err != nil {
		return nil, err
	}
	c, err := a.clients.Get(ctx, cl.region, creds)
	if err != nil {
		return nil, machine.RequeueAfter(UnavailableRetry, "AWSConfigError", err)
	}
	return &target{ps: ps, cluster: cl, c: c}, nil
}

// Exists finds the Machine's instance by provider ID, else by the Machine UID tag. A
// terminated instance does not exist, but its provider ID is recorded so the controller
// knows the Machine had one. A Machine that never had an instance and whose providerSpec
// is unusable has none (Create reports the problem).
func (a *Actuator) Exists(ctx context.Context, m *machinev1beta1.Machine) (bool, error) {
	t, err := a.prepare(ctx, m)
	if err != nil {
		var term *machine.TerminalError
		if errors.As(err, &term) && ptr.Deref(m.Spec.ProviderID, "") == "" {
			return false, nil
		}
		return false, err
	}
	inst, err := a.find(ctx, m, t.c)
	if err != nil || inst == nil {
		return false, err
	}
	if gone(inst) {
		if ptr.Deref(m.Spec.ProviderID, "") == "" {
			m.Spec.ProviderID = ptr.To(providerID(inst))
		}
		setInstanceState(m, inst)
		return false, nil
	}
	a.seen.Store(m.UID, inst)
	return true, nil
}

// instance is the instance Exists just found for the Machine, else what find finds.
func (a *Actuator) instance(ctx context.Context, m *machinev1beta1.Machine, c *clients) (*ec2types.Instance, error) {
	if v, ok := a.seen.LoadAndDelete(m.UID); ok {
		return v.(*ec2types.Instance), nil
	}
	return a.find(ctx, m, c)
}

// Create launches the instance, or gets back the one an earlier attempt launched (same
// ClientToken).
func (a *Actuator) Create(ctx context.Context, m *machinev1beta1.Machine) error {
	t, err := a.prepare(ctx, m)
	if err != nil {
		return err
	}
	if t.cluster.infraName == "" {
		return machine.RequeueAfter(SecretRetry, "InfrastructureNameUnknown",
			fmt.Errorf("no infrastructure name for the %s<name> tag: Infrastructure %s has no status.infrastructureName and the Machine no %s label",
				ClusterTagPrefix, InfrastructureName, ClusterNameLabel))
	}
	userData, err := a.userData(ctx, m, t.ps)
	if err != nil {
		return err
	}
	out, err := a.launch(ctx, m, t, userData)
	if err != nil {
		return a.creationFailed(m, err)
	}
	if len(out.Instances) != 1 {
		return machine.RequeueAfter(UnavailableRetry, "UnexpectedResponse", fmt.Errorf("RunInstances answered %d instances, want 1", len(out.Instances)))
	}
	a.backoff.reset(m.UID)
	setCreation(m, true, "MachineCreationSucceeded", "launched instance "+aws.ToString(out.Instances[0].InstanceId))
	apply(m, t, &out.Instances[0])
	return nil
}

// launch resolves the providerSpec's references and runs the instance. A refusal that would
// fail the Machine, of a launch some of whose references the lookups memo answered, is tried
// once more with every reference looked up afresh: an ID remembered from a lookup up to
// lookupTTL ago may be what EC2 refuses (a security group replaced since), and that is not
// the providerSpec's fault.
func (a *Actuator) launch(ctx context.Context, m *machinev1beta1.Machine, t *target, userData []byte) (*ec2.RunInstancesOutput, error) {
	for fresh := false; ; fresh = true {
		r, err := a.resolve(ctx, m, t.c, t.ps)
		if err != nil {
			return nil, err
		}
		out, err := t.c.ec2.RunInstances(ctx, launchInput(m, t.ps, t.cluster, r, userData))
		if err == nil {
			return out, nil
		}
		err = a.classify(m.UID, "launching the instance", specPath, err)
		var terminal *machine.TerminalError
		if !errors.As(err, &terminal) || fresh || !r.remembered {
			return nil, err
		}
		t.c.lookups.forget()
	}
}

// Update refreshes the Machine's provider ID, addresses, labels and provider status, and
// registers the instance with the providerSpec's load balancers.
func (a *Actuator) Update(ctx context.Context, m *machinev1beta1.Machine) error {
	t, err := a.prepare(ctx, m)
	if err != nil {
		return err
	}
	inst, err := a.instance(ctx, m, t.c)
	if err != nil {
		return err
	}
	if inst == nil {
		return machine.RequeueAfter(time.Second, "InstanceNotFound", fmt.Errorf("the instance disappeared"))
	}
	apply(m, t, inst)
	if err := a.registerLoadBalancers(ctx, m, t, inst); err != nil {
		return err
	}
	a.backoff.reset(m.UID)
	return nil
}

// Delete deregisters the instance from the load balancers and terminates it. It is
// idempotent.
func (a *Actuator) Delete(ctx context.Context, m *machinev1beta1.Machine) error {
	t, err := a.prepare(ctx, m)
	if err != nil {
		return err
	}
	inst, err := a.instance(ctx, m, t.c)
	if err != nil || inst == nil {
		return err
	}
	if err := a.deregisterLoadBalancers(ctx, m, t, inst); err != nil {
		return err
	}
	if !gone(inst) {
		out, err := t.c.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{aws.ToString(inst.InstanceId)}})
		if err != nil && APIErrorCode(err) != "InvalidInstanceID.NotFound" {
			return a.classify(m.UID, "terminating the instance", nil, err)
		}
		if out != nil && len(out.TerminatingInstances) == 1 {
			inst.State = out.TerminatingInstances[0].CurrentState
		}
	}
	a.backoff.reset(m.UID)
	setInstanceState(m, inst)
	return nil
}

// find returns the Machine's instance, or nil when there is none.
func (a *Actuator) find(ctx context.Context, m *machinev1beta1.Machine, c *clients) (*ec2types.Instance, error) {
	in := &ec2.DescribeInstancesInput{}
	if pid := ptr.Deref(m.Spec.ProviderID, ""); pid != "" {
		id, err := instanceIDOf(pid)
		if err != nil {
			return nil, machine.InvalidConfiguration("spec.providerID: Invalid value: %q: %v", pid, err)
		}
		in.InstanceIds = []string{id}
	} else {
		in.Filters = []ec2types.Filter{{Name: aws.String("client-token"), Values: []string{string(m.UID)}}}
	}
	var found []ec2types.Instance
	p := ec2.NewDescribeInstancesPaginator(c.ec2, in)
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if APIErrorCode(err) == "InvalidInstanceID.NotFound" {
			return nil, nil
		}
		if err != nil {
			return nil, a.classify(m.UID, "looking up the instance", nil, err)
		}
		for _, r := range out.Reservations {
			found = append(found, r.Instances...)
		}
	}
	if len(found) == 0 {
		return nil, nil
	}
	// One token, one instance; should there be more, a live one and the newest wins.
	best := slices.MaxFunc(found, func(x, y ec2types.Instance) int {
		if gx, gy := gone(&x), gone(&y); gx != gy {
			return map[bool]int{true: -1, false: 1}[gx]
		}
		return aws.ToTime(x.LaunchTime).Compare(aws.ToTime(y.LaunchTime))
	})
	return &best, nil
}

// gone reports whether the instance is terminated (or on its way there).
func gone(inst *ec2types.Instance) bool {
	if inst.State == nil {
		return false
	}
	return inst.State.Name == ec2types.InstanceStateNameTerminated
}
