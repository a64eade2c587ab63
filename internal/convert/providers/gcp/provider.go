package gcp

import (
	"context"
	"encoding/json"

	configv1 "github.com/openshift/api/config/v1"
	capgv1 "sigs.k8s.io/cluster-api-provider-gcp/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/platform"
)

// Provider describes GCP to machina: Google Compute Engine through the Cluster API Provider
// GCP (CAPG, v1beta1). On OpenShift the region and project come from the Infrastructure
// object, the network every instance joins from the Cluster's GCPCluster; without GCP
// platform status the GCPCluster gives all three.
func Provider() platform.Provider {
	return platform.Provider{
		Name:                   Platform{}.Name(),
		ProviderSpecKinds:      []string{ProviderSpecKind},
		InfraMachine:           kinds.InfraMachineGVK(),
		InfraMachineTemplate:   kinds.InfraMachineTemplateGVK(),
		InfraCluster:           infraCluster,
		InfraMachineFinalizers: []string{capgv1.MachineFinalizer},
		// The pinned release's GCPMachine controller skips a paused object and writes nothing.
		PauseAckByOperator: true,
		PlatformTypes:      []configv1.PlatformType{configv1.GCPPlatformType},
		NewContext:         clusterContext,

		AddToScheme: capgv1.AddToScheme,
		NewPlatform: platform.Regional(New),
		RegionOf:    regionOf,
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
		ZoneRegion:         ZoneRegion,
		ApplyClusterObject: applyClusterObject,
	}
}

// infraCluster is the kind of the cluster-wide object CAPG reads: the GCPCluster.
var infraCluster = capgv1.GroupVersion.WithKind("GCPCluster")

// applyClusterObject adds an Infrastructure's project or a GCPCluster's network to a GCP
// platform.
var applyClusterObject = platform.ApplyWith(Platform.WithInfrastructure, Platform.WithGCPCluster)

// regionOf reads the region of an Infrastructure with GCP platform status or of a
// GCPCluster.
func regionOf(obj client.Object) string {
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

// clusterContext builds the context from the Infrastructure (region, project) and, when the
// cluster has one, its GCPCluster (the network; all three when the Infrastructure has no GCP
// platform status). Without a GCPCluster, Machines convert with their network unchecked and
// cannot convert back.
func clusterContext(ctx context.Context, c client.Reader, infra *configv1.Infrastructure, ns string) (convert.Context, error) {
	return platform.StatusOrInfraCluster(ctx, c, infra, ns, configv1.GCPPlatformType, &capgv1.GCPCluster{}, infraCluster.Kind, NewContext, applyClusterObject,
		func(name string, gc *capgv1.GCPCluster) (convert.Context, error) {
			p, err := FromGCPCluster(gc)
			if err != nil {
				return convert.Context{}, err
			}
			return convert.Context{ClusterName: name, Platform: p}, nil
		})
}
