package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SimMachineProviderSpec is the Machine API providerSpec.value of a Machine on the
// simulated cloud (apiVersion infrastructure.machina.dev/v1alpha1). It is not a CRD: it
// travels inside machine.openshift.io Machines and MachineSets.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type SimMachineProviderSpec struct {
	metav1.TypeMeta `json:",inline"`

	// region of the simulated cloud, for example "sim-east-1".
	Region string `json:"region"`

	// zone within the region, for example "sim-east-1a".
	Zone string `json:"zone"`

	// instanceType names an entry of the simulated cloud's catalogue, e.g. "s1.large".
	InstanceType string `json:"instanceType"`

	// image is the image ID to boot.
	Image string `json:"image"`

	// userDataSecret names a Secret in the Machine's namespace whose "userData" key is
	// passed to the instance.
	// +optional
	UserDataSecret *corev1.LocalObjectReference `json:"userDataSecret,omitempty"`

	// tags are added to the cloud instance.
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
}

// SimMachineProviderStatus is the Machine API providerStatus of a simulated Machine.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type SimMachineProviderStatus struct {
	metav1.TypeMeta `json:",inline"`

	// instanceID of the cloud instance.
	// +optional
	InstanceID string `json:"instanceID,omitempty"`

	// instanceState as last seen in the cloud.
	// +optional
	InstanceState string `json:"instanceState,omitempty"`

	// conditions describe the last operations on the instance.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
