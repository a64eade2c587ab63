// Package simactuator is the Machine API actuator of the simulated cloud: it turns a
// Machine with a SimMachineProviderSpec into a cloud instance, using the Machine's UID as the
// idempotency token so no retry, crash or restart ever creates a second instance.
package simactuator

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/api"
	cloudclient "github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/controllers/machineapi/machine"
)

// Tags the actuator puts on every instance it creates.
const (
	TagMachineUID = "machina.dev/machine-uid"
	TagMachine    = "machina.dev/machine"
	TagAPI        = "machina.dev/api"
)

// Labels the actuator sets on the Machine, as Machine API providers do.
const (
	LabelInstanceType = "machine.openshift.io/instance-type"
	LabelRegion       = "machine.openshift.io/region"
	LabelZone         = "machine.openshift.io/zone"
)

// Retry intervals for conditions the cloud reports.
const (
	CapacityRetry    = 30 * time.Second
	UnavailableRetry = 10 * time.Second
	SecretRetry      = 10 * time.Second
)

// Actuator implements machine.Actuator against the simulated cloud.
type Actuator struct {
	Cloud  *cloudclient.Client
	Client client.Client // reads user-data Secrets
	// seen holds the instance Exists found for a Machine (by UID) for the Update that follows
	// in the same pass, so that a pass looks its instance up once.
	seen sync.Map
}

var _ machine.Actuator = &Actuator{}

// Exists finds the Machine's instance by provider ID, else by the Machine UID tag. A
// terminated instance does not exist, but its provider ID is recorded so the controller
// knows the Machine had one.
func (a *Actuator) Exists(ctx context.Context, m *machinev1beta1.Machine) (bool, error) {
	inst, err := a.find(ctx, m)
	if err != nil || inst == nil {
		return false, err
	}
	if inst.State == api.StateTerminated {
		if m.Spec.ProviderID == nil {
			m.Spec.ProviderID = ptr.To(inst.ProviderID)
		}
		setInstanceState(m, inst)
		return false, nil
	}
	a.seen.Store(m.UID, inst)
	return true, nil
}

// Create launches the instance (or gets back the one an earlier attempt launched).
func (a *Actuator) Create(ctx context.Context, m *machinev1beta1.Machine) error {
	ps, err := ProviderSpec(m)
	if err != nil {
		return err
	}
	userData, err := a.userData(ctx, m, ps)
	if err != nil {
		return err
	}
	tags := map[string]string{}
	for k, v := range ps.Tags {
		tags[k] = v
	}
	tags[TagMachineUID] = string(m.UID)
	tags[TagMachine] = m.Namespace + "/" + m.Name
	tags[TagAPI] = machinev1beta1.GroupName
	resp, err := a.Cloud.RunInstances(ctx, api.RunInstancesRequest{
		ClientToken: string(m.UID), Region: ps.Region, Zone: ps.Zone,
		InstanceType: ps.InstanceType, Image: ps.Image, UserData: userData, Tags: tags,
	})
	if err != nil {
		return cloudError("creating the instance", err)
	}
	apply(m, ps, &resp.Instance)
	return nil
}

// Update refreshes the Machine's provider ID, addresses, provider status and labels.
func (a *Actuator) Update(ctx context.Context, m *machinev1beta1.Machine) error {
	inst, err := a.instance(ctx, m)
	if err != nil {
		return err
	}
	if inst == nil {
		return machine.RequeueAfter(time.Second, "InstanceNotFound", fmt.Errorf("the instance disappeared"))
	}
	ps, _ := ProviderSpec(m) // labels only; a Machine that exists had a valid spec
	apply(m, ps, inst)
	return nil
}

// Delete terminates the instance. It is idempotent.
func (a *Actuator) Delete(ctx context.Context, m *machinev1beta1.Machine) error {
	inst, err := a.find(ctx, m)
	if err != nil || inst == nil {
		return err
	}
	if inst.State == api.StateRunning || inst.State == api.StatePending {
		if _, err := a.Cloud.TerminateInstances(ctx, inst.InstanceID); err != nil && !cloudclient.IsNotFound(err) {
			return cloudError("terminating the instance", err)
		}
	}
	setInstanceState(m, inst)
	return nil
}

// instance is the instance Exists just found for the Machine, else what find finds.
func (a *Actuator) instance(ctx context.Context, m *machinev1beta1.Machine) (*api.Instance, error) {
	if v, ok := a.seen.LoadAndDelete(m.UID); ok {
		return v.(*api.Instance), nil
	}
	return a.find(ctx, m)
}

// find returns the Machine's instance, or nil when there is none.
func (a *Actuator) find(ctx context.Context, m *machinev1beta1.Machine) (*api.Instance, error) {
	if m.Spec.ProviderID != nil && *m.Spec.ProviderID != "" {
		pid, err := api.ParseProviderID(*m.Spec.ProviderID)
		if err != nil {
			return nil, machine.InvalidConfiguration("spec.providerID: %v", err)
		}
		inst, err := a.Cloud.GetInstance(ctx, pid.InstanceID)
		if cloudclient.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, cloudError("looking up the instance", err)
		}
		return inst, nil
	}
	list, err := a.Cloud.DescribeInstances(ctx, api.DescribeInstancesRequest{Tags: map[string]string{TagMachineUID: string(m.UID)}})
	if err != nil {
		return nil, cloudError("looking up the instance", err)
	}
	if len(list) == 0 {
		return nil, nil
	}
	// One token, one instance: the newest is the only one.
	return &list[len(list)-1], nil
}

func apply(m *machinev1beta1.Machine, ps *infrav1.SimMachineProviderSpec, inst *api.Instance) {
	m.Spec.ProviderID = ptr.To(inst.ProviderID)
	m.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: inst.PrivateIP},
		{Type: corev1.NodeInternalDNS, Address: inst.Hostname},
		{Type: corev1.NodeHostName, Address: inst.Hostname},
	}
	setInstanceState(m, inst)
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	m.Labels[LabelInstanceType] = inst.InstanceType
	m.Labels[LabelRegion] = inst.Region
	m.Labels[LabelZone] = inst.Zone
	_ = ps
}

func setInstanceState(m *machinev1beta1.Machine, inst *api.Instance) {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[machine.InstanceStateAnnotation] = string(inst.State)
	st := infrav1.SimMachineProviderStatus{InstanceID: inst.InstanceID, InstanceState: string(inst.State)}
	st.APIVersion, st.Kind = infrav1.GroupVersion.String(), "SimMachineProviderStatus"
	if old, err := ProviderStatus(m); err == nil && old != nil {
		st.Conditions = old.Conditions
	}
	raw, _ := json.Marshal(st)
	m.Status.ProviderStatus = &runtimeRawExtension{Raw: raw}
}

func (a *Actuator) userData(ctx context.Context, m *machinev1beta1.Machine, ps *infrav1.SimMachineProviderSpec) ([]byte, error) {
	if ps.UserDataSecret == nil || ps.UserDataSecret.Name == "" {
		return nil, nil
	}
	var s corev1.Secret
	err := a.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: ps.UserDataSecret.Name}, &s)
	if apierrors.IsNotFound(err) {
		return nil, machine.RequeueAfter(SecretRetry, "UserDataSecretNotFound",
			fmt.Errorf("spec.providerSpec.value.userDataSecret: Secret %s/%s not found", m.Namespace, ps.UserDataSecret.Name))
	}
	if err != nil {
		return nil, err
	}
	data, ok := s.Data["userData"]
	if !ok {
		return nil, machine.RequeueAfter(SecretRetry, "UserDataSecretInvalid",
			fmt.Errorf("spec.providerSpec.value.userDataSecret: Secret %s/%s has no userData key", m.Namespace, ps.UserDataSecret.Name))
	}
	return data, nil
}
