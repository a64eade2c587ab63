package provider

import (
	"context"

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
	}
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
