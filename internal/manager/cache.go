package manager

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cacheOptions keep in the informer caches only what the controllers read:
//
//   - no managedFields, which on a Machine written by four controllers weigh more than the
//     rest of it; except on Cluster API MachineSets, whose spec.replicas owners the sync reads
//     to tell an autoscaler's scaling from its own (sync/machinesetsync/autoscaler.go);
//   - of a CustomResourceDefinition, its names, labels and versions without their schemas:
//     the Cluster API controllers read the contract labels and served versions of the
//     provider CRDs (clusterapi/external), and one provider's schemas (CAPA's) are megabytes.
func cacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&clusterv1.MachineSet{}:                     {Transform: func(o any) (any, error) { return o, nil }},
			&apiextensionsv1.CustomResourceDefinition{}: {Transform: stripCRD},
		},
	}
}

func stripCRD(o any) (any, error) {
	crd, ok := o.(*apiextensionsv1.CustomResourceDefinition)
	if !ok {
		return o, nil
	}
	crd.ManagedFields = nil
	crd.Annotations = nil // kubectl's last-applied-configuration repeats the whole CRD
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		v.Schema, v.AdditionalPrinterColumns, v.SelectableFields = nil, nil, nil
	}
	crd.Spec.Conversion = nil
	crd.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
	return crd, nil
}
