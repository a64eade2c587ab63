package vsphere

import (
	"context"
	"encoding/json"

	configv1 "github.com/openshift/api/config/v1"
	capvv1 "sigs.k8s.io/cluster-api-provider-vsphere/api/govmomi/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/platform"
)

// Provider describes vSphere to machina: VMware vSphere through the Cluster API Provider
// vSphere (CAPV v1.16.1, its govmomi API v1beta2). Its conversion needs no region: it takes
// the vCenters from the Infrastructure object and, when the cluster has one, the server of its
// VSphereCluster. CAPV's VSphereMachine controller writes the Paused condition (the Cluster
// API's paused.EnsurePausedCondition), so no pause acknowledgement annotation is needed.
func Provider() platform.Provider {
	return platform.Provider{
		Name:                   Platform{}.Name(),
		ProviderSpecKinds:      []string{ProviderSpecKind},
		InfraMachine:           kinds.InfraMachineGVK(),
		InfraMachineTemplate:   kinds.InfraMachineTemplateGVK(),
		InfraCluster:           infraCluster,
		InfraMachineFinalizers: []string{capvv1.MachineFinalizer},
		PlatformTypes:          []configv1.PlatformType{configv1.VSpherePlatformType},
		NewContext:             clusterContext,
		Regionless:             true,

		AddToScheme: capvv1.AddToScheme,
		NewPlatform: func(string) (convert.Platform, error) { return New(), nil },
		MatchesKindlessSpec: func(raw []byte) bool {
			var t struct {
				Workspace         json.RawMessage `json:"workspace"`
				NumCoresPerSocket json.RawMessage `json:"numCoresPerSocket"`
				MemoryMiB         json.RawMessage `json:"memoryMiB"`
			}
			_ = json.Unmarshal(raw, &t) // a malformed value has none; conversion reports it
			return len(t.Workspace) > 0 || len(t.NumCoresPerSocket) > 0 || len(t.MemoryMiB) > 0
		},
		ApplyClusterObject: applyClusterObject,
	}
}

// infraCluster is the kind of the cluster-wide object CAPV reads: the VSphereCluster.
var infraCluster = capvv1.GroupVersion.WithKind("VSphereCluster")

// applyClusterObject adds an Infrastructure's vCenters or a VSphereCluster's server to a
// vSphere platform.
var applyClusterObject = platform.ApplyWith(Platform.WithInfrastructure, Platform.WithVSphereCluster)

// clusterContext builds the context from the Infrastructure (the vCenters) and, when the
// cluster has one, its VSphereCluster (the server CAPV uses for a VSphereMachine naming none).
// Without vSphere platform status the VSphereCluster alone gives the context.
func clusterContext(ctx context.Context, c client.Reader, infra *configv1.Infrastructure, ns string) (convert.Context, error) {
	return platform.StatusOrInfraCluster(ctx, c, infra, ns, configv1.VSpherePlatformType, &capvv1.VSphereCluster{}, infraCluster.Kind, NewContext, applyClusterObject,
		func(name string, vc *capvv1.VSphereCluster) (convert.Context, error) {
			return convert.Context{ClusterName: name, Platform: New().WithVSphereCluster(vc)}, nil
		})
}
