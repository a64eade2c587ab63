package provider

import (
	"context"
	"encoding/json"

	configv1 "github.com/openshift/api/config/v1"
	capgv1 "sigs.k8s.io/cluster-api-provider-gcp/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/convert/providers/gcp"
)

// GCP is Google Compute Engine through the Cluster API Provider GCP (CAPG, v1beta1). On
// OpenShift the region and project come from the Infrastructure object, the network every
// instance joins from the Cluster's GCPCluster; without GCP platform status the GCPCluster
// gives all three.
func GCP() Provider {
	return Provider{
		Name:                   "gcp",
		ProviderSpecKinds:      []string{gcp.ProviderSpecKind},
		InfraMachine:           capgv1.GroupVersion.WithKind("GCPMachine"),
		InfraMachineTemplate:   capgv1.GroupVersion.WithKind("GCPMachineTemplate"),
		InfraCluster:           capgv1.GroupVersion.WithKind("GCPCluster"),
		InfraMachineFinalizers: []string{capgv1.MachineFinalizer},
		// The pinned release's GCPMachine controller skips a paused object and writes nothing.
		PauseAckByOperator: true,
		PlatformTypes:      []configv1.PlatformType{configv1.GCPPlatformType},
		NewContext:         gcpContext,

		AddToScheme: capgv1.AddToScheme,
		NewPlatform: func(region string) (convert.Platform, error) {
			p, err := gcp.New(region)
			if err != nil {
				return nil, err
			}
			return p, nil
		},
		RegionOf: gcpRegionOf,
		SpecRegion: func(raw []byte) string {
			var t struct {
				Region string `json:"region"`
			}
			_ = json.Unmarshal(raw, &t) // a malformed value names no region; conversion reports it
			return t.Region
		},
		MatchesKindlessSpec: func(raw []byte) bool {
			var t struct {
				MachineType     json.RawMessage `json:"machineType"`
				ServiceAccounts json.RawMessage `json:"serviceAccounts"`
			}
			_ = json.Unmarshal(raw, &t) // a malformed value has neither; conversion reports it
			return len(t.MachineType) > 0 || len(t.ServiceAccounts) > 0
		},
		ZoneRegion:         gcp.ZoneRegion,
		ApplyClusterObject: gcpApplyClusterObject,
	}
}

// gcpApplyClusterObject adds an Infrastructure's project or a GCPCluster's network to a GCP
// platform.
func gcpApplyClusterObject(p convert.Platform, obj client.Object) convert.Platform {
	gp, ok := p.(gcp.Platform)
	if !ok {
		return p
	}
	switch o := obj.(type) {
	case *configv1.Infrastructure:
		return gp.WithInfrastructure(o)
	case *capgv1.GCPCluster:
		return gp.WithGCPCluster(o)
	}
	return p
}

// gcpRegionOf reads the region of an Infrastructure with GCP platform status or of a
// GCPCluster.
func gcpRegionOf(obj client.Object) string {
	switch o := obj.(type) {
	case *configv1.Infrastructure:
		if ps := o.Status.PlatformStatus; ps != nil && ps.GCP != nil {
			return ps.GCP.Region
		}
	case *capgv1.GCPCluster:
		return o.Spec.Region
	}
	return ""
}

// gcpContext builds the context from the Infrastructure (region, project) and, when the
// cluster has one, its GCPCluster (the network; all three when the Infrastructure has no GCP
// platform status). Without a GCPCluster, Machines convert with their network unchecked and
// cannot convert back.
func gcpContext(ctx context.Context, c client.Reader, infra *configv1.Infrastructure, ns string) (convert.Context, error) {
	return statusOrInfraCluster(ctx, c, infra, ns, configv1.GCPPlatformType, &capgv1.GCPCluster{}, "GCPCluster", gcp.NewContext, gcpApplyClusterObject,
		func(name string, gc *capgv1.GCPCluster) (convert.Context, error) {
			p, err := gcp.FromGCPCluster(gc)
			if err != nil {
				return convert.Context{}, err
			}
			return convert.Context{ClusterName: name, Platform: p}, nil
		})
}
