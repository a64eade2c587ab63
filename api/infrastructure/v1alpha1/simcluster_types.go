package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// SimClusterFinalizer lets the provider remove the simulated network before the SimCluster goes.
const SimClusterFinalizer = "simcluster.infrastructure.machina.dev"

// SimClusterSpec is the desired state of a simulated cluster's infrastructure.
type SimClusterSpec struct {
	// region of the simulated cloud the cluster lives in, for example "sim-east-1".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +required
	Region string `json:"region"`

	// controlPlaneEndpoint is the endpoint of the cluster's API server.
	// +optional
	ControlPlaneEndpoint clusterv1.APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`
}

// SimClusterStatus is the observed state of a SimCluster.
type SimClusterStatus struct {
	// initialization follows the Cluster API v1beta2 infrastructure cluster contract.
	// +optional
	Initialization Initialization `json:"initialization,omitempty,omitzero"`

	// networkID is the ID of the cluster's network in the simulated cloud.
	// +optional
	NetworkID string `json:"networkID,omitempty"`

	// failureDomains are the zones of the region that Machines can be spread across.
	// +optional
	// +listType=map
	// +listMapKey=name
	FailureDomains []clusterv1.FailureDomain `json:"failureDomains,omitempty"`

	// conditions describe the state of the SimCluster.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=simclusters,scope=Namespaced,shortName=simc,categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster this SimCluster belongs to"
// +kubebuilder:printcolumn:name="Region",type="string",JSONPath=".spec.region"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned"
// +kubebuilder:printcolumn:name="Network",type="string",JSONPath=".status.networkID",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// SimCluster is the infrastructure cluster of the simulated provider.
type SimCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SimClusterSpec   `json:"spec,omitempty"`
	Status SimClusterStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// SimClusterList is a list of SimClusters.
type SimClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SimCluster `json:"items"`
}
