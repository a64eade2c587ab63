package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// SimMachineTemplateResource is the template a MachineSet clones SimMachines from.
type SimMachineTemplateResource struct {
	// metadata is copied onto the SimMachines created from this template.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec of the SimMachines created from this template.
	// +required
	Spec SimMachineSpec `json:"spec"`
}

// SimMachineTemplateSpec is the desired state of a SimMachineTemplate.
type SimMachineTemplateSpec struct {
	// template describes the SimMachines to create.
	// +required
	Template SimMachineTemplateResource `json:"template"`
}

// SimMachineTemplateStatus reports what a Node built from this template offers, for the
// cluster autoscaler's scale-from-zero.
type SimMachineTemplateStatus struct {
	// capacity of a Node built from this template: cpu, memory and extended resources.
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`

	// nodeInfo describes the Node's architecture and operating system.
	// +optional
	NodeInfo *NodeInfo `json:"nodeInfo,omitempty"`

	// conditions describe the state of the SimMachineTemplate.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=simmachinetemplates,scope=Namespaced,shortName=simmt,categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Type",type="string",JSONPath=".spec.template.spec.instanceType"
// +kubebuilder:printcolumn:name="Image",type="string",JSONPath=".spec.template.spec.image"
// +kubebuilder:printcolumn:name="CPU",type="string",JSONPath=".status.capacity.cpu",priority=1
// +kubebuilder:printcolumn:name="Memory",type="string",JSONPath=".status.capacity.memory",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// SimMachineTemplate is the infrastructure machine template of the simulated provider.
type SimMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SimMachineTemplateSpec   `json:"spec,omitempty"`
	Status SimMachineTemplateStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// SimMachineTemplateList is a list of SimMachineTemplates.
type SimMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SimMachineTemplate `json:"items"`
}
