package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// SimMachinePoolFinalizer lets the provider delete the scaling group before the pool goes.
const SimMachinePoolFinalizer = "simmachinepool.infrastructure.machina.dev"

// SimMachinePoolMode says what the pool's scaling group lets Cluster API do.
// +kubebuilder:validation:Enum=MachinePoolMachines;ScaleOnly
type SimMachinePoolMode string

const (
	// MachinePoolMachinesMode means one Machine per instance; deleting a Machine deletes its instance.
	MachinePoolMachinesMode SimMachinePoolMode = "MachinePoolMachines"
	// ScaleOnlyMode means the group only changes size; Machines are shown but cannot be deleted one by one.
	ScaleOnlyMode SimMachinePoolMode = "ScaleOnly"
)

// SimMachinePoolSpec is the desired state of a simulated scaling group.
type SimMachinePoolSpec struct {
	// template is the launch template of the pool's instances.
	// +required
	Template InstanceSpec `json:"template"`

	// providerIDList lists the provider IDs of the pool's instances.
	// +optional
	// +kubebuilder:validation:MaxItems=10000
	ProviderIDList []string `json:"providerIDList,omitempty"`

	// maxSurge is how many instances above the desired count a rolling update may create.
	// +optional
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`

	// mode selects MachinePoolMachines (default) or ScaleOnly.
	// +optional
	// +kubebuilder:default=MachinePoolMachines
	Mode SimMachinePoolMode `json:"mode,omitempty"`
}

// SimMachinePoolStatus is the observed state of a SimMachinePool.
type SimMachinePoolStatus struct {
	// initialization follows the Cluster API v1beta2 infrastructure machine pool contract.
	// +optional
	Initialization Initialization `json:"initialization,omitempty,omitzero"`

	// groupID is the scaling group's ID in the simulated cloud.
	// +optional
	GroupID string `json:"groupID,omitempty"`

	// replicas is the number of instances in the group.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// infrastructureMachineKind is the kind of the per-instance infrastructure machines
	// (SimMachine), opting in to MachinePool Machines.
	// +optional
	InfrastructureMachineKind string `json:"infrastructureMachineKind,omitempty"`

	// conditions describe the state of the SimMachinePool.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=simmachinepools,scope=Namespaced,shortName=simmp,categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster this SimMachinePool belongs to"
// +kubebuilder:printcolumn:name="Replicas",type="integer",JSONPath=".status.replicas"
// +kubebuilder:printcolumn:name="Type",type="string",JSONPath=".spec.template.instanceType"
// +kubebuilder:printcolumn:name="Mode",type="string",JSONPath=".spec.mode",priority=1
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// SimMachinePool is the infrastructure machine pool of the simulated provider: a scaling group.
type SimMachinePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SimMachinePoolSpec   `json:"spec,omitempty"`
	Status SimMachinePoolStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// SimMachinePoolList is a list of SimMachinePools.
type SimMachinePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SimMachinePool `json:"items"`
}
