package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// SimMachineFinalizer lets the provider terminate the instance before the SimMachine goes.
const SimMachineFinalizer = "simmachine.infrastructure.machina.dev"

// SimMachineSpec is the desired state of one simulated machine.
type SimMachineSpec struct {
	InstanceSpec `json:",inline"`

	// providerID is set by the provider once the instance exists, in the form
	// sim://<region>/<zone>/<instance-id>.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	ProviderID string `json:"providerID,omitempty"`

	// zone pins the instance to one zone of the cluster's region. When empty the owning
	// Machine's failure domain is used.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Zone string `json:"zone,omitempty"`
}

// SimMachineStatus is the observed state of a SimMachine.
type SimMachineStatus struct {
	// initialization follows the Cluster API v1beta2 infrastructure machine contract.
	// +optional
	Initialization Initialization `json:"initialization,omitempty,omitzero"`

	// instanceID of the instance in the simulated cloud.
	// +optional
	InstanceID string `json:"instanceID,omitempty"`

	// instanceState is the cloud's view of the instance: pending, running,
	// shutting-down or terminated.
	// +optional
	InstanceState string `json:"instanceState,omitempty"`

	// addresses of the instance.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Addresses []clusterv1.MachineAddress `json:"addresses,omitempty"`

	// failureDomain is the zone the instance runs in.
	// +optional
	FailureDomain string `json:"failureDomain,omitempty"`

	// conditions describe the state of the SimMachine.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=simmachines,scope=Namespaced,shortName=simm,categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster this SimMachine belongs to"
// +kubebuilder:printcolumn:name="Type",type="string",JSONPath=".spec.instanceType"
// +kubebuilder:printcolumn:name="State",type="string",JSONPath=".status.instanceState"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned"
// +kubebuilder:printcolumn:name="ProviderID",type="string",JSONPath=".spec.providerID",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// SimMachine is the infrastructure machine of the simulated provider: one cloud instance.
type SimMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SimMachineSpec   `json:"spec,omitempty"`
	Status SimMachineStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// SimMachineList is a list of SimMachines.
type SimMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SimMachine `json:"items"`
}
