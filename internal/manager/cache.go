package manager

import (
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/cachetrim"
)

// cacheOptions keep in the informer caches only what the controllers read:
//
//   - no managedFields, except on MachineSets of both APIs, whose spec.replicas owners the
//     sync reads to tell an autoscaler's scaling of a mirror from its own
//     (sync/machinesetsync/autoscaler.go);
//   - of a Node, not the container images its kubelet reports;
//   - of a CustomResourceDefinition, its names, labels and versions without their schemas.
func cacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&clusterv1.MachineSet{}:                     {Transform: keep},
			&machinev1beta1.MachineSet{}:                {Transform: keep},
			&apiextensionsv1.CustomResourceDefinition{}: {Transform: cachetrim.CRD},
			&corev1.Node{}:                              {Transform: cachetrim.Node},
		},
	}
}

// keep is the transform that keeps an object whole.
func keep(o any) (any, error) { return o, nil }
