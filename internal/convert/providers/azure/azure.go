// Package azure converts the Machine API AzureMachineProviderSpec (machine.openshift.io/v1beta1)
// to and from the Cluster API Provider Azure (CAPZ, infrastructure.cluster.x-k8s.io/v1beta1)
// AzureMachine and AzureMachineTemplate.
//
// CAPZ keeps once per cluster, on the AzureCluster, what the Machine API repeats on every
// providerSpec: the location, the subscription, the resource groups, the virtual network and
// the load balancers network interfaces join. The platform carries those values; a Machine
// that names others cannot be converted.
package azure

import (
	"errors"
	"fmt"
	"slices"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilnet "k8s.io/utils/net"
	"k8s.io/utils/ptr"
	capzv1 "sigs.k8s.io/cluster-api-provider-azure/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
)

const (
	// ProviderSpecKind is the kind of the providerSpec value.
	ProviderSpecKind = "AzureMachineProviderSpec"
	// DefaultCredentialsSecret is the credentials secret OpenShift's Machine API uses on Azure.
	DefaultCredentialsSecret = "azure-cloud-credentials" //nolint:gosec // a Secret's name, not a credential
	// DefaultSecretNamespace is the namespace of the Machine API's secrets.
	DefaultSecretNamespace = "openshift-machine-api"
	// legacyAPIVersion is the providerSpec apiVersion of older OpenShift releases.
	legacyAPIVersion = "azureproviderconfig.openshift.io/v1beta1"
)

// Platform is the Azure convert.Platform. Its string fields are "" when the value is not
// known here (offline conversion without the AzureCluster); conversion then reports what it
// could not check, and converting back refuses what it cannot write.
type Platform struct {
	// Location is the cluster's region (AzureCluster spec.location).
	Location string
	// SubscriptionID is the cluster's subscription (AzureCluster spec.subscriptionID). The
	// Machine API names images and identities relative to it.
	SubscriptionID string
	// ResourceGroup is the cluster's resource group (AzureCluster spec.resourceGroup,
	// Infrastructure status.platformStatus.azure.resourceGroupName).
	ResourceGroup string
	// NetworkResourceGroup is the virtual network's resource group (AzureCluster
	// spec.networkSpec.vnet.resourceGroup, Infrastructure networkResourceGroupName); it
	// defaults to ResourceGroup.
	NetworkResourceGroup string
	// Vnet is the cluster's virtual network (AzureCluster spec.networkSpec.vnet.name).
	Vnet string
	// OutboundLoadBalancer is the load balancer CAPZ adds every worker's interface to
	// (AzureCluster spec.networkSpec.nodeOutboundLB), "" for none; nil when not known.
	OutboundLoadBalancer *string
	// APIServerLB is the AzureCluster's API server load balancer (spec.networkSpec.apiServerLB),
	// which CAPZ adds control-plane Machines to; nil when the AzureCluster is not known.
	APIServerLB *LoadBalancer
	// ControlPlaneOutboundLB is the AzureCluster's control-plane outbound load balancer
	// (spec.networkSpec.controlPlaneOutboundLB), nil for none or when not known.
	ControlPlaneOutboundLB *LoadBalancer
	// CredentialsSecret is the Machine API credentials secret name; CAPZ takes credentials
	// from the AzureCluster's identityRef instead. Defaults to DefaultCredentialsSecret.
	CredentialsSecret string
	// SecretNamespace is the Machine API namespace; defaults to DefaultSecretNamespace.
	SecretNamespace string
	// IPFamily is the Infrastructure's status.platformStatus.azure.ipFamily (IPv4 when the
	// Infrastructure names none), "" when the Infrastructure is not known here. On a
	// dual-stack cluster the actuator gives every interface an IPv6 IP configuration too.
	IPFamily configv1.IPFamilyType
	// VnetIPv6 says whether the AzureCluster's virtual network lists an IPv6 CIDR
	// (spec.networkSpec.vnet.cidrBlocks), which is what makes CAPZ give every interface an
	// IPv6 IP configuration; nil when the AzureCluster is not known.
	VnetIPv6 *bool

	// controlPlane is set on the platform converting control-plane Machines (ForControlPlane).
	controlPlane bool
}

var _ convert.Platform = Platform{}

// New returns the platform of a cluster in location whose other values are not known.
func New(location string) (Platform, error) {
	if location == "" {
		return Platform{}, errors.New("azure: the cluster location (region) is required")
	}
	return Platform{Location: location}, nil
}

// WithInfrastructure returns p with the resource groups and the IP family an Infrastructure
// with Azure platform status names. Other Infrastructures leave p unchanged.
func (p Platform) WithInfrastructure(infra *configv1.Infrastructure) Platform {
	ps := infra.Status.PlatformStatus
	if ps == nil || ps.Azure == nil {
		return p
	}
	if ps.Azure.ResourceGroupName != "" {
		p.ResourceGroup = ps.Azure.ResourceGroupName
	}
	if ps.Azure.NetworkResourceGroupName != "" {
		p.NetworkResourceGroup = ps.Azure.NetworkResourceGroupName
	}
	p.IPFamily = ps.Azure.IPFamily
	if p.IPFamily == "" {
		p.IPFamily = configv1.IPv4 // the API's default, and what clusters older than the field are
	}
	return p
}

// WithAzureCluster returns p with what an AzureCluster says about every Machine. The
// location is not changed.
func (p Platform) WithAzureCluster(c *capzv1.AzureCluster) Platform {
	if c == nil {
		return p
	}
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&p.SubscriptionID, c.Spec.SubscriptionID)
	set(&p.ResourceGroup, c.Spec.ResourceGroup)
	set(&p.NetworkResourceGroup, c.Spec.NetworkSpec.Vnet.ResourceGroup)
	set(&p.Vnet, c.Spec.NetworkSpec.Vnet.Name)
	lb := ""
	if o := c.Spec.NetworkSpec.NodeOutboundLB; o != nil {
		lb = o.Name
		if lb == "" {
			lb = c.Name // CAPZ names the node outbound load balancer after the cluster
		}
	}
	p.OutboundLoadBalancer = ptr.To(lb)
	p.APIServerLB = apiServerLBOf(c)
	p.ControlPlaneOutboundLB = controlPlaneOutboundLBOf(c)
	p.VnetIPv6 = ptr.To(slices.ContainsFunc(c.Spec.NetworkSpec.Vnet.CIDRBlocks, utilnet.IsIPv6CIDRString))
	return p
}

// FromAzureCluster returns the platform of the cluster an AzureCluster describes.
func FromAzureCluster(c *capzv1.AzureCluster) (Platform, error) {
	if c == nil {
		return Platform{}, errors.New("azure: no AzureCluster")
	}
	p, err := New(c.Spec.Location)
	if err != nil {
		return Platform{}, err
	}
	return p.WithAzureCluster(c), nil
}

// NewContext returns the conversion context of an OpenShift cluster on Azure from its
// Infrastructure object and its AzureCluster: the Infrastructure names no region, so the
// AzureCluster is required.
func NewContext(infra *configv1.Infrastructure, c *capzv1.AzureCluster) (convert.Context, error) {
	name, err := convert.ClusterNameFromInfrastructure(infra)
	if err != nil {
		return convert.Context{}, err
	}
	if ps := infra.Status.PlatformStatus; ps == nil || ps.Type != configv1.AzurePlatformType {
		return convert.Context{}, fmt.Errorf("azure: Infrastructure %q has no Azure platform status", infra.Name)
	}
	p, err := FromAzureCluster(c)
	if err != nil {
		return convert.Context{}, err
	}
	p = p.WithInfrastructure(infra).WithAzureCluster(c) // the AzureCluster is what CAPZ reads
	return convert.Context{ClusterName: name, Platform: p, Namespaces: convert.OpenShiftNamespaces}, nil
}

// Name is the platform's short name.
func (Platform) Name() string { return "azure" }

// kinds is the plumbing between the AzureMachine and AzureMachineTemplate and their spec.
var kinds = convert.NewInfraKinds(convert.InfraTypes[capzv1.AzureMachine, capzv1.AzureMachineTemplate, capzv1.AzureMachineSpec]{
	Machine:      capzv1.GroupVersion.WithKind("AzureMachine"),
	Template:     capzv1.GroupVersion.WithKind("AzureMachineTemplate"),
	MachineSpec:  func(m *capzv1.AzureMachine) *capzv1.AzureMachineSpec { return &m.Spec },
	TemplateSpec: func(t *capzv1.AzureMachineTemplate) *capzv1.AzureMachineSpec { return &t.Spec.Template.Spec },
	TemplateMetadata: func(t *capzv1.AzureMachineTemplate) (map[string]string, map[string]string) {
		return t.Spec.Template.ObjectMeta.Labels, t.Spec.Template.ObjectMeta.Annotations
	},
	ProviderID: convert.PointerProviderID(func(s *capzv1.AzureMachineSpec) **string { return &s.ProviderID }),
	Instance:   "virtual machine",
})

// InfraMachineGVK is the Cluster API infrastructure kind of a Machine.
func (Platform) InfraMachineGVK() schema.GroupVersionKind { return kinds.InfraMachineGVK() }

// InfraMachineTemplateGVK is the Cluster API infrastructure kind of a MachineSet's template.
func (Platform) InfraMachineTemplateGVK() schema.GroupVersionKind {
	return kinds.InfraMachineTemplateGVK()
}

// NewInfraMachine wraps spec (an *AzureMachineSpec) in an AzureMachine carrying providerID.
func (Platform) NewInfraMachine(spec convert.InfraSpec, providerID string) client.Object {
	return kinds.NewInfraMachine(spec, providerID)
}

// NewInfraMachineTemplate wraps spec (an *AzureMachineSpec) in an AzureMachineTemplate.
func (Platform) NewInfraMachineTemplate(spec convert.InfraSpec) client.Object {
	return kinds.NewInfraMachineTemplate(spec)
}

// SplitInfraMachine returns the spec (without providerID) and providerID of an AzureMachine.
func (Platform) SplitInfraMachine(obj client.Object, path *field.Path, r *convert.Report) (convert.InfraSpec, string, bool) {
	return kinds.SplitInfraMachine(obj, path, r)
}

// SplitInfraMachineTemplate returns the machine spec of an AzureMachineTemplate.
func (Platform) SplitInfraMachineTemplate(obj client.Object, path *field.Path, r *convert.Report) (convert.InfraSpec, bool) {
	return kinds.SplitInfraMachineTemplate(obj, path, r)
}

func (p Platform) credentialsSecret() string {
	if p.CredentialsSecret == "" {
		return DefaultCredentialsSecret
	}
	return p.CredentialsSecret
}

func (p Platform) secretNamespace() string {
	if p.SecretNamespace == "" {
		return DefaultSecretNamespace
	}
	return p.SecretNamespace
}

// networkResourceGroup is the virtual network's resource group, "" when not known.
func (p Platform) networkResourceGroup() string {
	if p.NetworkResourceGroup != "" {
		return p.NetworkResourceGroup
	}
	return p.ResourceGroup
}
