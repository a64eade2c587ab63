package convert

import (
	"encoding/json"
	"maps"

	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// InstanceView is what a platform's Machine API actuator records on a Machine about the
// instance it runs: the instance type, region and zone labels, the instance-state annotation
// and the providerStatus. None of it is converted (dropProviderOwned), because it describes
// the instance rather than asks for one; the sync writes it onto the Machine API copy of a
// Cluster API-authoritative Machine, where no actuator does, so `oc get machines` reads TYPE,
// REGION, ZONE and STATE as for any other Machine.
type InstanceView struct {
	// Labels holds MachineAPIInstanceTypeLabel, MachineAPIRegionLabel and MachineAPIZoneLabel,
	// each only when known.
	Labels map[string]string
	// State is the instance's state as the provider last saw it ("" when unknown).
	State string
	// ProviderStatus is the platform's Machine API providerStatus value (nil when none).
	ProviderStatus *runtime.RawExtension
}

// InstanceDescriber is implemented by platforms whose Machine API actuator records an
// InstanceView: the platform reads it off the Cluster API Machine and its InfraMachine.
type InstanceDescriber interface {
	DescribeInstance(infra client.Object, machine *clusterv1.Machine) InstanceView
}

// DescribeInstance returns the InstanceView of a Cluster API Machine and its InfraMachine on
// platform p; false when p records none.
func DescribeInstance(p Platform, infra client.Object, machine *clusterv1.Machine) (InstanceView, bool) {
	d, ok := p.(InstanceDescriber)
	if !ok {
		return InstanceView{}, false
	}
	return d.DescribeInstance(infra, machine), true
}

// NewInstanceView builds an InstanceView from its parts, leaving out empty labels and
// marshalling status (nil for none) as the providerStatus value.
func NewInstanceView(instanceType, region, zone, state string, status any) InstanceView {
	v := InstanceView{Labels: map[string]string{}, State: state}
	for k, val := range map[string]string{MachineAPIInstanceTypeLabel: instanceType, MachineAPIRegionLabel: region, MachineAPIZoneLabel: zone} {
		if val != "" {
			v.Labels[k] = val
		}
	}
	if status != nil {
		if raw, err := json.Marshal(status); err == nil {
			v.ProviderStatus = &runtime.RawExtension{Raw: raw}
		}
	}
	return v
}

// Apply puts the view on a Machine API Machine's labels and annotations (status is the
// caller's): the keys it knows are set, those it does not know are removed, other keys stay.
func (v InstanceView) Apply(labels, annotations map[string]string) (map[string]string, map[string]string) {
	labels, annotations = maps.Clone(labels), maps.Clone(annotations)
	if labels == nil {
		labels = map[string]string{}
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	for _, k := range []string{MachineAPIInstanceTypeLabel, MachineAPIRegionLabel, MachineAPIZoneLabel} {
		delete(labels, k)
	}
	maps.Copy(labels, v.Labels)
	delete(annotations, MachineAPIInstanceStateAnnotation)
	if v.State != "" {
		annotations[MachineAPIInstanceStateAnnotation] = v.State
	}
	return labels, annotations
}
