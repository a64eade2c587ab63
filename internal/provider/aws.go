package provider

import (
	"context"

	configv1 "github.com/openshift/api/config/v1"
	capav1 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/convert/providers/aws"
)

// AWS is Amazon EC2 through the Cluster API Provider AWS (CAPA v2). On OpenShift the region
// comes from the Infrastructure object; a cluster without AWS platform status falls back to
// the region of the Cluster's AWSCluster.
func AWS() Provider {
	return Provider{
		Name:                   "aws",
		ProviderSpecKinds:      []string{aws.ProviderSpecKind},
		InfraMachine:           capav1.GroupVersion.WithKind("AWSMachine"),
		InfraMachineTemplate:   capav1.GroupVersion.WithKind("AWSMachineTemplate"),
		InfraCluster:           capav1.GroupVersion.WithKind("AWSCluster"),
		InfraMachineFinalizers: []string{capav1.MachineFinalizer},
		PlatformTypes:          []configv1.PlatformType{configv1.AWSPlatformType},
		NewContext:             awsContext,
	}
}

func awsContext(ctx context.Context, c client.Reader, infra *configv1.Infrastructure, ns string) (convert.Context, error) {
	if ps := infra.Status.PlatformStatus; ps != nil && ps.Type == configv1.AWSPlatformType {
		return aws.NewContext(infra)
	}
	name, err := convert.ClusterNameFromInfrastructure(infra)
	if err != nil {
		return convert.Context{}, err
	}
	ac := &capav1.AWSCluster{}
	if err := InfraCluster(ctx, c, ns, name, ac, "AWSCluster"); err != nil {
		return convert.Context{}, err
	}
	p, err := aws.FromAWSCluster(ac)
	if err != nil {
		return convert.Context{}, err
	}
	return convert.Context{ClusterName: name, Platform: p}, nil
}
