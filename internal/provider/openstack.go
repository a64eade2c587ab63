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
// is the API and ingress virtual IPs of the Infrastructure object and, for control-plane
// Machines, the OpenStackCluster's API server load balancer and floating IP settings.
func OpenStack() Provider {
	return Provider{
		Name:                   "openstack",
		ProviderSpecKinds:      []string{openstack.ProviderSpecKind},
		InfraMachine:           capov1.SchemeGroupVersion.WithKind("OpenStackMachine"),
		InfraMachineTemplate:   capov1.SchemeGroupVersion.WithKind("OpenStackMachineTemplate"),
		InfraCluster:           capov1.SchemeGroupVersion.WithKind("OpenStackCluster"),
		InfraMachineFinalizers: []string{capov1.MachineFinalizer},
		// The pinned release's OpenStackMachine controller skips a paused object and writes nothing.
		PauseAckByOperator: true,
		PlatformTypes:      []configv1.PlatformType{configv1.OpenStackPlatformType},
		NewContext:         openstackContext,
		Regionless:         true,

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
		ApplyClusterObject: openstackApplyClusterObject,
	}
}

// openstackApplyClusterObject adds an Infrastructure's virtual IPs or an OpenStackCluster's
// API server ingress to an OpenStack platform.
func openstackApplyClusterObject(p convert.Platform, obj client.Object) convert.Platform {
	op, ok := p.(openstack.Platform)
	if !ok {
		return p
	}
	switch o := obj.(type) {
	case *configv1.Infrastructure:
		return op.WithInfrastructure(o)
	case *capov1.OpenStackCluster:
		return op.WithOpenStackCluster(o)
	}
	return p
}

// openstackContext builds the context from the Infrastructure (the cluster name and, when it
// has OpenStack platform status, the virtual IPs; without them, Machines convert with a
// warning that their network ports do not allow the virtual IPs) and, when the cluster has
// one, its OpenStackCluster (without it, control-plane Machines convert with a warning that
// CAPO's API server ingress was not checked).
func openstackContext(ctx context.Context, c client.Reader, infra *configv1.Infrastructure, ns string) (convert.Context, error) {
	name, err := convert.ClusterNameFromInfrastructure(infra)
	if err != nil {
		return convert.Context{}, err
	}
	p := openstack.New().WithInfrastructure(infra)
	oc := &capov1.OpenStackCluster{}
	switch err := InfraCluster(ctx, c, ns, name, oc, "OpenStackCluster"); {
	case err == nil:
		p = p.WithOpenStackCluster(oc)
	case !absent(err):
		return convert.Context{}, err
	}
	return convert.Context{ClusterName: name, Platform: p}, nil
}
