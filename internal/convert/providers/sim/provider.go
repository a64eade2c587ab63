package sim

import (
	"context"
	"encoding/json"

	configv1 "github.com/openshift/api/config/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	simv1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/platform"
)

// Provider describes machina's simulated cloud to machina. Its region lives on the
// SimCluster, as a Cluster API provider keeps it; the Infrastructure object gives only the
// cluster name.
func Provider() platform.Provider {
	return platform.Provider{
		Name:                   Platform{}.Name(),
		ProviderSpecKinds:      []string{ProviderSpecKind},
		InfraMachine:           kinds.InfraMachineGVK(),
		InfraMachineTemplate:   kinds.InfraMachineTemplateGVK(),
		InfraCluster:           infraCluster,
		InfraMachineFinalizers: []string{simv1.SimMachineFinalizer},
		// The lab's Infrastructure says None: the simulated cloud is no OpenShift platform.
		PlatformTypes: []configv1.PlatformType{configv1.NonePlatformType},
		NewContext:    clusterContext,

		AddToScheme:         simv1.AddToScheme,
		NewPlatform:         platform.Regional(New),
		RegionOf:            regionOf,
		SpecRegion:          specRegion,
		MatchesKindlessSpec: func(raw []byte) bool { return specRegion(raw) != "" },
	}
}

// infraCluster is the kind of the cluster-wide object the simulated provider reads.
var infraCluster = simv1.GroupVersion.WithKind("SimCluster")

// regionOf reads a SimCluster's spec.region; the Infrastructure object never names the
// simulated cloud's region.
func regionOf(obj client.Object) string {
	if sc, ok := obj.(*simv1.SimCluster); ok {
		return sc.Spec.Region
	}
	return ""
}

// clusterContext builds the context from the Infrastructure (the cluster name) and the
// Cluster's SimCluster (the region), which is required.
func clusterContext(ctx context.Context, c client.Reader, infra *configv1.Infrastructure, ns string) (convert.Context, error) {
	name, err := convert.ClusterNameFromInfrastructure(infra)
	if err != nil {
		return convert.Context{}, err
	}
	sc := &simv1.SimCluster{}
	if err := platform.InfraCluster(ctx, c, ns, name, sc, infraCluster.Kind); err != nil {
		return convert.Context{}, err
	}
	return NewContext(name, sc)
}

// specRegion reads a SimMachineProviderSpec's top-level region, a field only it has.
func specRegion(raw []byte) string {
	var v struct {
		Region string `json:"region"`
	}
	_ = json.Unmarshal(raw, &v) // a malformed value names no region; conversion reports it
	return v.Region
}
