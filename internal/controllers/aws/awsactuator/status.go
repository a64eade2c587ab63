package awsactuator

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/machina-dev/machina/internal/controllers/machineapi/machine"
)

// Labels the actuator sets on the Machine, as Machine API providers do.
const (
	LabelInstanceType = "machine.openshift.io/instance-type"
	LabelRegion       = "machine.openshift.io/region"
	LabelZone         = "machine.openshift.io/zone"
	// LabelInterruptible goes into spec.metadata.labels of a spot Machine, so its Node
	// carries it.
	LabelInterruptible = "machine.openshift.io/interruptible-instance"
)

// Condition types of the providerStatus.
const (
	// ConditionMachineCreation reports the outcome of the last launch attempt; its reason
	// is the EC2 error code (without dots) when EC2 refused it.
	ConditionMachineCreation = "MachineCreation"
	// ConditionLoadBalancers reports whether the instance is registered with the
	// providerSpec's load balancers.
	ConditionLoadBalancers = "LoadBalancersRegistered"
)

// ProviderIDPrefix starts an EC2 instance's provider ID: aws:///<zone>/<instance-id>.
const ProviderIDPrefix = "aws:///"

func providerID(inst *ec2types.Instance) string {
	zone := ""
	if inst.Placement != nil {
		zone = aws.ToString(inst.Placement.AvailabilityZone)
	}
	return ProviderIDPrefix + zone + "/" + aws.ToString(inst.InstanceId)
}

// instanceIDOf reads the instance ID of aws:///<zone>/<id> (or aws://<region>/<zone>/<id>).
func instanceIDOf(pid string) (string, error) {
	rest, ok := strings.CutPrefix(pid, "aws://")
	i := strings.LastIndex(rest, "/")
	if !ok || i < 0 || !strings.HasPrefix(rest[i+1:], "i-") {
		return "", fmt.Errorf("not an EC2 provider ID (aws:///<zone>/i-…)")
	}
	return rest[i+1:], nil
}

// apply records the instance on the Machine: provider ID, addresses, state, labels.
func apply(m *machinev1beta1.Machine, t *target, inst *ec2types.Instance) {
	m.Spec.ProviderID = ptr.To(providerID(inst))
	var addrs []corev1.NodeAddress
	add := func(typ corev1.NodeAddressType, v *string) {
		if s := aws.ToString(v); s != "" {
			addrs = append(addrs, corev1.NodeAddress{Type: typ, Address: s})
		}
	}
	add(corev1.NodeInternalIP, inst.PrivateIpAddress)
	add(corev1.NodeExternalIP, inst.PublicIpAddress)
	add(corev1.NodeInternalDNS, inst.PrivateDnsName)
	add(corev1.NodeExternalDNS, inst.PublicDnsName)
	add(corev1.NodeHostName, inst.PrivateDnsName)
	if len(addrs) > 0 {
		m.Status.Addresses = addrs
	}
	setInstanceState(m, inst)
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	m.Labels[LabelInstanceType] = string(inst.InstanceType)
	m.Labels[LabelRegion] = t.c.region
	if inst.Placement != nil {
		m.Labels[LabelZone] = aws.ToString(inst.Placement.AvailabilityZone)
	}
	if inst.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
		if m.Spec.Labels == nil {
			m.Spec.Labels = map[string]string{}
		}
		m.Spec.Labels[LabelInterruptible] = ""
	}
}

// setInstanceState records the instance's ID and state in the annotation and the
// providerStatus, keeping its conditions.
func setInstanceState(m *machinev1beta1.Machine, inst *ec2types.Instance) {
	state := ""
	if inst.State != nil {
		state = string(inst.State.Name)
	}
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[machine.InstanceStateAnnotation] = state
	st := providerStatusOf(m)
	st.InstanceID, st.InstanceState = inst.InstanceId, ptr.To(state)
	if inst.Placement != nil && aws.ToString(inst.Placement.HostId) != "" {
		st.DedicatedHost = &machinev1beta1.DedicatedHostStatus{ID: aws.ToString(inst.Placement.HostId)}
	}
	setProviderStatus(m, st)
}

// providerStatusOf is the Machine's providerStatus, or an empty one when it has none or
// it does not decode.
func providerStatusOf(m *machinev1beta1.Machine) *machinev1beta1.AWSMachineProviderStatus {
	st, err := ProviderStatus(m)
	if err != nil || st == nil {
		return &machinev1beta1.AWSMachineProviderStatus{}
	}
	return st
}

func setProviderCondition(m *machinev1beta1.Machine, typ string, ok bool, reason, msg string) {
	st := providerStatusOf(m)
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg})
	setProviderStatus(m, st)
}

func setCreation(m *machinev1beta1.Machine, ok bool, reason, msg string) {
	setProviderCondition(m, ConditionMachineCreation, ok, reason, msg)
}

// creationFailed records a failed launch in the providerStatus and returns err.
func (a *Actuator) creationFailed(m *machinev1beta1.Machine, err error) error {
	setCreation(m, false, reasonOf(err), err.Error())
	return err
}

// reasonOf is the condition reason of an actuator error.
func reasonOf(err error) string {
	var rq *machine.RequeueAfterError
	var term *machine.TerminalError
	switch {
	case errors.As(err, &rq):
		return rq.Reason
	case errors.As(err, &term):
		return string(term.Reason)
	}
	return "Failed"
}
