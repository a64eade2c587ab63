package provider

import (
	"context"
	"encoding/json"

	configv1 "github.com/openshift/api/config/v1"
	capov1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/convert/providers/openstack"
)

// OpenStack is OpenStack through the Cluster API Provider OpenStack (CAPO, v1beta1). Its
// conversion needs no region (the clouds secret names it); what it takes from the cluster
// is the API and ingress virtual IPs of the Infrastructure object.
func OpenStack() Provider {
	return Provider{
		Name:                   "openstack",
		ProviderSpecKinds:      []string{openstack.ProviderSpecKind},
		InfraMachine:           capov1.SchemeGroupVersion.WithKind("OpenStackMachine"),
		InfraMachineTemplate:   capov1.SchemeGroupVersion.WithKind("OpenStackMachineTemplate"),
		InfraCluster:           capov1.SchemeGroupVersion.WithKind("OpenStackCluster"),
		InfraMachineFinalizers: []string{capov1.MachineFinalizer},
		PlatformTypes:          []configv1.PlatformType{configv1.OpenStackPlatformType},
		NewContext:             openstackContext,
		Regionless:             true,

		AddToScheme: capov1.AddToScheme,
		NewPlatform: func(string) (convert.Platform, error) { return openstack.New(), nil },
		MatchesKindlessSpec: func(raw []byte) bool {
			var t struct {
				Flavor       json.RawMessage `json:"flavor"`
				CloudsSecret json.RawMessage `json:"cloudsSecret"`
			}
			_ = json.Unmarshal(raw, &t) // a malformed value has neither; conversion reports it
			return len(t.Flavor) > 0 || len(t.CloudsSecret) > 0
		},
		ApplyClusterObject: func(p convert.Platform, obj client.Object) convert.Platform {
			op, ok := p.(openstack.Platform)
			infra, isInfra := obj.(*configv1.Infrastructure)
			if !ok || !isInfra {
				return p
			}
			return op.WithInfrastructure(infra)
		},
	}
}

// openstackContext builds the context from the Infrastructure: the cluster name and, when it
// has OpenStack platform status, the virtual IPs. Without them, Machines convert with a
// warning that their network ports do not allow the virtual IPs.
func openstackContext(_ context.Context, _ client.Reader, infra *configv1.Infrastructure, _ string) (convert.Context, error) {
	name, err := convert.ClusterNameFromInfrastructure(infra)
	if err != nil {
		return convert.Context{}, err
	}
	return convert.Context{ClusterName: name, Platform: openstack.New().WithInfrastructure(infra)}, nil
}
