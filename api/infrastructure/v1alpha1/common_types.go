package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func metav1AddToGroupVersion(scheme *runtime.Scheme) {
	metav1.AddToGroupVersion(scheme, GroupVersion)
}

// Condition types and reasons reported by the simulated provider.
const (
	// ReadyCondition is True when the simulated infrastructure object is usable.
	ReadyCondition = "Ready"
	// PausedCondition mirrors the Cluster API paused contract.
	PausedCondition = "Paused"

	// InstanceProvisioningReason: the cloud instance exists but is not running yet.
	InstanceProvisioningReason = "InstanceProvisioning"
	// InstanceRunningReason: the cloud instance is running.
	InstanceRunningReason = "InstanceRunning"
	// InstanceTerminatedReason: the cloud instance is gone.
	InstanceTerminatedReason = "InstanceTerminated"
	// WaitingForBootstrapDataReason: the owning Machine has no bootstrap data secret yet.
	WaitingForBootstrapDataReason = "WaitingForBootstrapData"
	// WaitingForClusterInfrastructureReason: the SimCluster is not provisioned yet.
	WaitingForClusterInfrastructureReason = "WaitingForClusterInfrastructure"
	// CloudErrorReason: the simulated cloud returned a (retryable) error.
	CloudErrorReason = "CloudError"
	// InvalidConfigurationReason: the spec names something the cloud does not know.
	InvalidConfigurationReason = "InvalidConfiguration"
	// MachineDeletingReason: the owning Machine is being deleted, so no instance is launched.
	MachineDeletingReason = "MachineDeleting"
)

// Initialization follows the Cluster API v1beta2 contract's status.initialization.
type Initialization struct {
	// provisioned is true once the infrastructure has been provisioned.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// InstanceSpec is what the simulated cloud needs to launch an instance. It is shared by
// SimMachine, SimMachineTemplate and the launch template of a SimMachinePool.
type InstanceSpec struct {
	// instanceType names an entry of the simulated cloud's instance type catalogue,
	// for example "s1.large".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +required
	InstanceType string `json:"instanceType"`

	// image is the image ID to boot, for example "sim-rhcos-9".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +required
	Image string `json:"image"`

	// tags are added to the cloud instance.
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
}

// NodeInfo describes the operating system and architecture of the Nodes an instance
// type produces, as the Cluster API autoscaler scale-from-zero contract reads it.
type NodeInfo struct {
	// architecture of the Node, e.g. amd64 or arm64.
	// +optional
	Architecture string `json:"architecture,omitempty"`
	// operatingSystem of the Node, e.g. linux.
	// +optional
	OperatingSystem string `json:"operatingSystem,omitempty"`
}
