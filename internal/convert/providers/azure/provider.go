package azure

import (
	"context"
	"encoding/json"
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	capzv1 "sigs.k8s.io/cluster-api-provider-azure/api/v1beta1"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/platform"
)

// Provider describes Azure to machina: Microsoft Azure through the Cluster API Provider Azure
// (CAPZ, v1beta1). The Infrastructure object names the resource groups but no region and no
// subscription, so the conversion context also needs the Cluster's AzureCluster.
func Provider() platform.Provider {
	return platform.Provider{
		Name:                   Platform{}.Name(),
		ProviderSpecKinds:      []string{ProviderSpecKind},
		InfraMachine:           kinds.InfraMachineGVK(),
		InfraMachineTemplate:   kinds.InfraMachineTemplateGVK(),
		InfraCluster:           infraCluster,
		InfraMachineFinalizers: []string{capzv1.MachineFinalizer},
		// CAPZ v1.26 writes no Paused condition; its AzureMachine controller adds this
		// annotation in every normal pass and removes it in the pass that sees the pause.
		PauseAckAnnotation: clusterctlv1.BlockMoveAnnotation,
		PlatformTypes:      []configv1.PlatformType{configv1.AzurePlatformType},
		NewContext:         clusterContext,

		AddToScheme: capzv1.AddToScheme,
		NewPlatform: platform.Regional(New),
		RegionOf: func(obj client.Object) string {
			if c, ok := obj.(*capzv1.AzureCluster); ok {
				return c.Spec.Location
			}
			return "" // the Infrastructure names no Azure region
		},
		SpecRegion: func(raw []byte) string {
			var t struct {
				Location string `json:"location"`
			}
			_ = json.Unmarshal(raw, &t) // a malformed value names no region; conversion reports it
			return t.Location
		},
		MatchesKindlessSpec: func(raw []byte) bool {
			var t struct {
				VMSize json.RawMessage `json:"vmSize"`
				OSDisk json.RawMessage `json:"osDisk"`
			}
			_ = json.Unmarshal(raw, &t) // a malformed value has neither; conversion reports it
			return len(t.VMSize) > 0 || len(t.OSDisk) > 0
		},
		ApplyClusterObject: platform.ApplyWith(Platform.WithInfrastructure, Platform.WithAzureCluster),
	}
}

// infraCluster is the kind of the cluster-wide object CAPZ reads: the AzureCluster.
var infraCluster = capzv1.GroupVersion.WithKind("AzureCluster")

// clusterContext builds the context from the Infrastructure (cluster name, resource groups)
// and the Cluster's AzureCluster (location, subscription, virtual network, node outbound
// load balancer), which is required: without it no Machine on Azure can be converted.
func clusterContext(ctx context.Context, c client.Reader, infra *configv1.Infrastructure, ns string) (convert.Context, error) {
	name, err := convert.ClusterNameFromInfrastructure(infra)
	if err != nil {
		return convert.Context{}, err
	}
	ac := &capzv1.AzureCluster{}
	if err := platform.InfraCluster(ctx, c, ns, name, ac, infraCluster.Kind); err != nil {
		return convert.Context{}, fmt.Errorf("azure: the cluster's location and subscription come from its AzureCluster: %w", err)
	}
	p, err := FromAzureCluster(ac)
	if err != nil {
		return convert.Context{}, err
	}
	return convert.Context{ClusterName: name, Platform: p.WithInfrastructure(infra).WithAzureCluster(ac)}, nil
}
