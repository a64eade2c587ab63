package provider

import (
	"context"
	"encoding/json"

	configv1 "github.com/openshift/api/config/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	simv1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/convert/providers/sim"
)

// Sim is machina's simulated cloud. Its region lives on the SimCluster, as a Cluster API
// provider keeps it; the Infrastructure object gives only the cluster name.
func Sim() Provider {
	return Provider{
		Name:                   "sim",
		ProviderSpecKinds:      []string{sim.ProviderSpecKind},
		InfraMachine:           simv1.GroupVersion.WithKind("SimMachine"),
		InfraMachineTemplate:   simv1.GroupVersion.WithKind("SimMachineTemplate"),
		InfraCluster:           simv1.GroupVersion.WithKind("SimCluster"),
		InfraMachineFinalizers: []string{simv1.SimMachineFinalizer},
		// The lab's Infrastructure says None: the simulated cloud is no OpenShift platform.
		PlatformTypes: []configv1.PlatformType{configv1.NonePlatformType},
		NewContext:    simContext,

		AddToScheme: simv1.AddToScheme,
		NewPlatform: func(region string) (convert.Platform, error) {
			p, err := sim.New(region)
			if err != nil {
				return nil, err
			}
			return p, nil
		},
		RegionOf:            simRegionOf,
		SpecRegion:          simSpecRegion,
		MatchesKindlessSpec: func(raw []byte) bool { return simSpecRegion(raw) != "" },
	}
}

// simRegionOf reads a SimCluster's spec.region; the Infrastructure object never names the
// simulated cloud's region.
func simRegionOf(obj client.Object) string {
	if sc, ok := obj.(*simv1.SimCluster); ok {
		return sc.Spec.Region
	}
	return ""
}

func simContext(ctx context.Context, c client.Reader, infra *configv1.Infrastructure, ns string) (convert.Context, error) {
	name, err := convert.ClusterNameFromInfrastructure(infra)
	if err != nil {
		return convert.Context{}, err
	}
	sc := &simv1.SimCluster{}
	if err := InfraCluster(ctx, c, ns, name, sc, "SimCluster"); err != nil {
		return convert.Context{}, err
	}
	return sim.NewContext(name, sc)
}

// simSpecRegion reads a SimMachineProviderSpec's top-level region, a field only it has.
func simSpecRegion(raw []byte) string {
	var v struct {
		Region string `json:"region"`
	}
	_ = json.Unmarshal(raw, &v) // a malformed value names no region; conversion reports it
	return v.Region
}
