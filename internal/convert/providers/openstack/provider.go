package openstack

import (
	"context"
	"encoding/json"

	configv1 "github.com/openshift/api/config/v1"
	capov1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/platform"
)

// Provider describes OpenStack to machina, through the Cluster API Provider OpenStack (CAPO,
// v1beta1). Its conversion needs no region (the clouds secret names it); what it takes from
// the cluster is the API and ingress virtual IPs of the Infrastructure object and, for
// control-plane Machines, the OpenStackCluster's API server load balancer and floating IP
// settings.
func Provider() platform.Provider {
	return platform.Provider{
		Name:                   Platform{}.Name(),
		ProviderSpecKinds:      []string{ProviderSpecKind},
		InfraMachine:           kinds.InfraMachineGVK(),
		InfraMachineTemplate:   kinds.InfraMachineTemplateGVK(),
		InfraCluster:           infraCluster,
		InfraMachineFinalizers: []string{capov1.MachineFinalizer},
		// The pinned release's OpenStackMachine controller skips a paused object and writes nothing.
		PauseAckByOperator: true,
		PlatformTypes:      []configv1.PlatformType{configv1.OpenStackPlatformType},
		NewContext:         clusterContext,
		Regionless:         true,

		AddToScheme: capov1.AddToScheme,
		NewPlatform: func(string) (convert.Platform, error) { return New(), nil },
		MatchesKindlessSpec: func(raw []byte) bool {
			var t struct {
				Flavor       json.RawMessage `json:"flavor"`
				CloudsSecret json.RawMessage `json:"cloudsSecret"`
			}
			_ = json.Unmarshal(raw, &t) // a malformed value has neither; conversion reports it
			return len(t.Flavor) > 0 || len(t.CloudsSecret) > 0
		},
		ApplyClusterObject: platform.ApplyWith(Platform.WithInfrastructure, Platform.WithOpenStackCluster),
	}
}

// infraCluster is the kind of the cluster-wide object CAPO reads: the OpenStackCluster.
var infraCluster = capov1.SchemeGroupVersion.WithKind("OpenStackCluster")

// clusterContext builds the context from the Infrastructure (the cluster name and, when it
// has OpenStack platform status, the virtual IPs; without them, Machines convert with a
// warning that their network ports do not allow the virtual IPs) and, when the cluster has
// one, its OpenStackCluster (without it, control-plane Machines convert with a warning that
// CAPO's API server ingress was not checked).
func clusterContext(ctx context.Context, c client.Reader, infra *configv1.Infrastructure, ns string) (convert.Context, error) {
	name, err := convert.ClusterNameFromInfrastructure(infra)
	if err != nil {
		return convert.Context{}, err
	}
	p := New().WithInfrastructure(infra)
	oc := &capov1.OpenStackCluster{}
	switch err := platform.InfraCluster(ctx, c, ns, name, oc, infraCluster.Kind); {
	case err == nil:
		p = p.WithOpenStackCluster(oc)
	case !platform.Absent(err):
		return convert.Context{}, err
	}
	return convert.Context{ClusterName: name, Platform: p}, nil
}
