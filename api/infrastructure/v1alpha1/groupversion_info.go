// Package v1alpha1 holds the API types of machina's simulated infrastructure provider:
// the Cluster API infrastructure kinds (SimCluster, SimMachine, SimMachineTemplate,
// SimMachinePool) and the Machine API providerSpec/providerStatus kinds.
//
// These are the only API types machina defines itself; everything else is imported from
// upstream (openshift/api, sigs.k8s.io/cluster-api/api).
//
// +kubebuilder:object:generate=true
// +groupName=infrastructure.machina.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of the simulated provider.
const GroupName = "infrastructure.machina.dev"

var (
	// GroupVersion is the group and version of these types.
	GroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types in this group-version to a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&SimCluster{}, &SimClusterList{},
		&SimMachine{}, &SimMachineList{},
		&SimMachineTemplate{}, &SimMachineTemplateList{},
		&SimMachinePool{}, &SimMachinePoolList{},
		&SimMachineProviderSpec{}, &SimMachineProviderStatus{},
	)
	metav1AddToGroupVersion(scheme)
	return nil
}
