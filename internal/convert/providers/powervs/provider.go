package powervs

import (
	"context"
	"encoding/json"

	configv1 "github.com/openshift/api/config/v1"
	capibmv1 "sigs.k8s.io/cluster-api-provider-ibmcloud/api/powervs/v1beta3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/platform"
)

// Provider describes PowerVS to machina: IBM Cloud Power Virtual Server through the Cluster
// API Provider IBM Cloud (CAPIBM, infrastructure.cluster.x-k8s.io/v1beta3). Its conversion
// needs no region (the workspace a providerSpec names decides where the instance runs); what
// it takes from the cluster is the workspace CAPIBM gives Machines that name none by ID, from
// the Cluster's IBMPowerVSCluster.
func Provider() platform.Provider {
	return platform.Provider{
		Name:                   Platform{}.Name(),
		ProviderSpecKinds:      []string{ProviderSpecKind},
		InfraMachine:           kinds.InfraMachineGVK(),
		InfraMachineTemplate:   kinds.InfraMachineTemplateGVK(),
		InfraCluster:           infraCluster,
		InfraMachineFinalizers: []string{capibmv1.IBMPowerVSMachineFinalizer},
		PlatformTypes:          []configv1.PlatformType{configv1.PowerVSPlatformType},
		NewContext:             clusterContext,
		Regionless:             true,

		AddToScheme: capibmv1.AddToScheme,
		NewPlatform: func(string) (convert.Platform, error) { return New(), nil },
		MatchesKindlessSpec: func(raw []byte) bool {
			var t struct {
				ServiceInstance json.RawMessage `json:"serviceInstance"`
				KeyPairName     json.RawMessage `json:"keyPairName"`
			}
			_ = json.Unmarshal(raw, &t) // a malformed value has neither; conversion reports it
			return len(t.ServiceInstance) > 0 || len(t.KeyPairName) > 0
		},
		// The Infrastructure says nothing the conversion needs beyond the cluster name.
		ApplyClusterObject: platform.ApplyWith(nil, Platform.WithIBMPowerVSCluster),
	}
}

// infraCluster is the kind of the cluster-wide object CAPIBM reads: the IBMPowerVSCluster.
var infraCluster = capibmv1.GroupVersion.WithKind("IBMPowerVSCluster")

// clusterContext builds the context from the Infrastructure (the cluster name) and, when the
// cluster has one, its IBMPowerVSCluster (the workspace of Machines that name none by ID).
// Without an IBMPowerVSCluster, workspaces given by name convert unchecked and Cluster API
// Machines without a workspace cannot convert back.
func clusterContext(ctx context.Context, c client.Reader, infra *configv1.Infrastructure, ns string) (convert.Context, error) {
	name, err := convert.ClusterNameFromInfrastructure(infra)
	if err != nil {
		return convert.Context{}, err
	}
	pc := &capibmv1.IBMPowerVSCluster{}
	switch err := platform.InfraCluster(ctx, c, ns, name, pc, infraCluster.Kind); {
	case err == nil:
	case platform.Absent(err):
		pc = nil
	default:
		return convert.Context{}, err
	}
	return NewContext(infra, pc)
}
