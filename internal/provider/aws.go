package provider

import (
	"context"
	"encoding/json"

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

		AddToScheme: capav1.AddToScheme,
		NewPlatform: func(region string) (convert.Platform, error) {
			p, err := aws.New(region)
			if err != nil {
				return nil, err
			}
			return p, nil
		},
		RegionOf: awsRegionOf,
		SpecRegion: func(raw []byte) string {
			var pl struct {
				Region string `json:"region"`
			}
			_ = json.Unmarshal(peekAWSSpec(raw).Placement, &pl) // no placement, no region
			return pl.Region
		},
		MatchesKindlessSpec: func(raw []byte) bool {
			t := peekAWSSpec(raw)
			return len(t.Placement) > 0 || len(t.AMI) > 0
		},
		ZoneRegion:         aws.ZoneRegion,
		ApplyClusterObject: awsApplyClusterObject,
	}
}

// awsApplyClusterObject adds an Infrastructure's ipFamily or an AWSCluster's control-plane
// load balancers to an AWS platform.
func awsApplyClusterObject(p convert.Platform, obj client.Object) convert.Platform {
	ap, ok := p.(aws.Platform)
	if !ok {
		return p
	}
	switch o := obj.(type) {
	case *configv1.Infrastructure:
		return ap.WithInfrastructure(o)
	case *capav1.AWSCluster:
		return ap.WithAWSCluster(o)
	}
	return p
}

// awsRegionOf reads the region of an Infrastructure with AWS platform status or of an
// AWSCluster.
func awsRegionOf(obj client.Object) string {
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

// awsContext builds the context from the Infrastructure (region, ipFamily) and, when the
// cluster has one, its AWSCluster (control-plane load balancers; the region when the
// Infrastructure has no AWS platform status). Without an AWSCluster, control-plane Machines
// convert with their load balancers unchecked and cannot convert back.
func awsContext(ctx context.Context, c client.Reader, infra *configv1.Infrastructure, ns string) (convert.Context, error) {
	return statusOrInfraCluster(ctx, c, infra, ns, configv1.AWSPlatformType, &capav1.AWSCluster{}, "AWSCluster", aws.NewContext, awsApplyClusterObject,
		func(name string, ac *capav1.AWSCluster) (convert.Context, error) {
			p, err := aws.FromAWSCluster(ac)
			if err != nil {
				return convert.Context{}, err
			}
			return convert.Context{ClusterName: name, Platform: p.WithInfrastructure(infra)}, nil
		})
}

// awsSpecFields are the AWSMachineProviderConfig fields no other platform's providerSpec has.
type awsSpecFields struct {
	Placement json.RawMessage `json:"placement"`
	AMI       json.RawMessage `json:"ami"`
}

func peekAWSSpec(raw []byte) awsSpecFields {
	var t awsSpecFields
	_ = json.Unmarshal(raw, &t) // a malformed value has neither; conversion reports it
	return t
}
