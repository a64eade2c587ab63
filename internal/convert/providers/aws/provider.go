package aws

import (
	"context"
	"encoding/json"

	configv1 "github.com/openshift/api/config/v1"
	capav1 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/platform"
)

// Provider describes AWS to machina: Amazon EC2 through the Cluster API Provider AWS (CAPA
// v2). On OpenShift the region comes from the Infrastructure object; a cluster without AWS
// platform status falls back to the region of the Cluster's AWSCluster.
func Provider() platform.Provider {
	return platform.Provider{
		Name:                   Platform{}.Name(),
		ProviderSpecKinds:      []string{ProviderSpecKind},
		InfraMachine:           kinds.InfraMachineGVK(),
		InfraMachineTemplate:   kinds.InfraMachineTemplateGVK(),
		InfraCluster:           infraCluster,
		InfraMachineFinalizers: []string{capav1.MachineFinalizer},
		PlatformTypes:          []configv1.PlatformType{configv1.AWSPlatformType},
		NewContext:             clusterContext,

		AddToScheme: capav1.AddToScheme,
		NewPlatform: platform.Regional(New),
		RegionOf:    regionOf,
		SpecRegion: func(raw []byte) string {
			var pl struct {
				Region string `json:"region"`
			}
			_ = json.Unmarshal(peekSpec(raw).Placement, &pl) // no placement, no region
			return pl.Region
		},
		MatchesKindlessSpec: func(raw []byte) bool {
			t := peekSpec(raw)
			return len(t.Placement) > 0 || len(t.AMI) > 0
		},
		ZoneRegion:         ZoneRegion,
		ApplyClusterObject: applyClusterObject,
	}
}

// infraCluster is the kind of the cluster-wide object CAPA reads: the AWSCluster.
var infraCluster = capav1.GroupVersion.WithKind("AWSCluster")

// applyClusterObject adds an Infrastructure's ipFamily or an AWSCluster's control-plane load
// balancers to an AWS platform.
var applyClusterObject = platform.ApplyWith(Platform.WithInfrastructure, Platform.WithAWSCluster)

// regionOf reads the region of an Infrastructure with AWS platform status or of an
// AWSCluster.
func regionOf(obj client.Object) string {
	switch o := obj.(type) {
	case *configv1.Infrastructure:
		if ps := o.Status.PlatformStatus; ps != nil && ps.AWS != nil {
			return ps.AWS.Region
		}
	case *capav1.AWSCluster:
		return o.Spec.Region
	}
	return ""
}

// clusterContext builds the context from the Infrastructure (region, ipFamily) and, when the
// cluster has one, its AWSCluster (control-plane load balancers; the region when the
// Infrastructure has no AWS platform status). Without an AWSCluster, control-plane Machines
// convert with their load balancers unchecked and cannot convert back.
func clusterContext(ctx context.Context, c client.Reader, infra *configv1.Infrastructure, ns string) (convert.Context, error) {
	return platform.StatusOrInfraCluster(ctx, c, infra, ns, configv1.AWSPlatformType, &capav1.AWSCluster{}, infraCluster.Kind, NewContext, applyClusterObject,
		func(name string, ac *capav1.AWSCluster) (convert.Context, error) {
			p, err := FromAWSCluster(ac)
			if err != nil {
				return convert.Context{}, err
			}
			return convert.Context{ClusterName: name, Platform: p.WithInfrastructure(infra)}, nil
		})
}

// specFields are the AWSMachineProviderConfig fields no other platform's providerSpec has.
type specFields struct {
	Placement json.RawMessage `json:"placement"`
	AMI       json.RawMessage `json:"ami"`
}

func peekSpec(raw []byte) specFields {
	var t specFields
	_ = json.Unmarshal(raw, &t) // a malformed value has neither; conversion reports it
	return t
}
