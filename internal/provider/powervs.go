package provider

import (
	"context"
	"encoding/json"

	configv1 "github.com/openshift/api/config/v1"
	capibmv1 "sigs.k8s.io/cluster-api-provider-ibmcloud/api/powervs/v1beta3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/convert/providers/powervs"
)

// PowerVS is IBM Cloud Power Virtual Server through the Cluster API Provider IBM Cloud
// (CAPIBM, infrastructure.cluster.x-k8s.io/v1beta3). Its conversion needs no region (the
// workspace a providerSpec names decides where the instance runs); what it takes from the
// cluster is the workspace CAPIBM gives Machines that name none by ID, from the Cluster's
// IBMPowerVSCluster.
func PowerVS() Provider {
	return Provider{
		Name:                   "powervs",
		ProviderSpecKinds:      []string{powervs.ProviderSpecKind},
		InfraMachine:           capibmv1.GroupVersion.WithKind("IBMPowerVSMachine"),
		InfraMachineTemplate:   capibmv1.GroupVersion.WithKind("IBMPowerVSMachineTemplate"),
		InfraCluster:           capibmv1.GroupVersion.WithKind("IBMPowerVSCluster"),
		InfraMachineFinalizers: []string{capibmv1.IBMPowerVSMachineFinalizer},
		PlatformTypes:          []configv1.PlatformType{configv1.PowerVSPlatformType},
		NewContext:             powervsContext,
		Regionless:             true,

		AddToScheme: capibmv1.AddToScheme,
		NewPlatform: func(string) (convert.Platform, error) { return powervs.New(), nil },
		MatchesKindlessSpec: func(raw []byte) bool {
			var t struct {
				ServiceInstance json.RawMessage `json:"serviceInstance"`
				KeyPairName     json.RawMessage `json:"keyPairName"`
			}
			_ = json.Unmarshal(raw, &t) // a malformed value has neither; conversion reports it
			return len(t.ServiceInstance) > 0 || len(t.KeyPairName) > 0
		},
		ApplyClusterObject: func(p convert.Platform, obj client.Object) convert.Platform {
			pp, ok := p.(powervs.Platform)
			c, isCluster := obj.(*capibmv1.IBMPowerVSCluster)
			if !ok || !isCluster {
				return p
			}
			return pp.WithIBMPowerVSCluster(c)
		},
	}
}

// powervsContext builds the context from the Infrastructure (the cluster name) and, when the
// cluster has one, its IBMPowerVSCluster (the workspace of Machines that name none by ID).
// Without an IBMPowerVSCluster, workspaces given by name convert unchecked and Cluster API
// Machines without a workspace cannot convert back.
func powervsContext(ctx context.Context, c client.Reader, infra *configv1.Infrastructure, ns string) (convert.Context, error) {
	name, err := convert.ClusterNameFromInfrastructure(infra)
	if err != nil {
		return convert.Context{}, err
	}
	pc := &capibmv1.IBMPowerVSCluster{}
	switch err := InfraCluster(ctx, c, ns, name, pc, "IBMPowerVSCluster"); {
	case err == nil:
	case absent(err):
		pc = nil
	default:
		return convert.Context{}, err
	}
	return powervs.NewContext(infra, pc)
}
