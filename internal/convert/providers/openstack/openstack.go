// Package openstack converts the Machine API OpenstackProviderSpec (machine.openshift.io/v1alpha1)
// to and from the Cluster API Provider OpenStack (CAPO, infrastructure.cluster.x-k8s.io/v1beta1)
// OpenStackMachine and OpenStackMachineTemplate.
//
// OpenShift's OpenStack actuator gives every port it makes from a providerSpec network the
// cluster's API and ingress virtual IPs as allowed address pairs, read from the Infrastructure
// object; CAPO ports say so explicitly, so the platform carries those addresses.
package openstack

import (
	"errors"
	"fmt"
	"slices"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	capov1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
)

const (
	// ProviderSpecKind is the kind of the providerSpec value.
	ProviderSpecKind = "OpenstackProviderSpec"
	// DefaultSecretNamespace is the namespace of the clouds secret a Machine API providerSpec
	// names; CAPO reads the secret from the OpenStackMachine's own namespace.
	DefaultSecretNamespace = "openshift-machine-api"
)

// Platform is the OpenStack convert.Platform.
type Platform struct {
	// VIPs are the cluster's API and ingress virtual IPs (Infrastructure
	// status.platformStatus.openstack apiServerInternalIPs and ingressIPs). The Machine API
	// actuator allows them on every port made from a providerSpec network; nil when they are
	// not known (offline without the Infrastructure).
	VIPs []string
	// SecretNamespace is the Machine API namespace the clouds secret lives in; defaults to
	// DefaultSecretNamespace.
	SecretNamespace string
	// APIServer is what the OpenStackCluster has CAPO do for control-plane Machines; nil when
	// it is not known (offline without the OpenStackCluster, or a cluster without one).
	APIServer *APIServerIngress
}

var _ convert.Platform = Platform{}

// New returns the platform of an OpenStack cluster whose virtual IPs are not known.
func New() Platform { return Platform{} }

// FromInfrastructure returns the platform of an OpenShift cluster on OpenStack.
func FromInfrastructure(infra *configv1.Infrastructure) (Platform, error) {
	if infra == nil {
		return Platform{}, errors.New("openstack: no Infrastructure object")
	}
	ps := infra.Status.PlatformStatus
	if ps == nil || ps.Type != configv1.OpenStackPlatformType {
		return Platform{}, fmt.Errorf("openstack: Infrastructure %q has no OpenStack platform status", infra.Name)
	}
	return New().WithInfrastructure(infra), nil
}

// WithInfrastructure returns p with the virtual IPs an Infrastructure names. An
// Infrastructure without OpenStack platform status leaves p unchanged.
func (p Platform) WithInfrastructure(infra *configv1.Infrastructure) Platform {
	ps := infra.Status.PlatformStatus
	if ps == nil || ps.OpenStack == nil {
		return p
	}
	o := ps.OpenStack
	var vips []string
	for _, ip := range append(append([]string{o.APIServerInternalIP}, o.APIServerInternalIPs...), append([]string{o.IngressIP}, o.IngressIPs...)...) { //nolint:staticcheck // older clusters still set only the single address
		if ip != "" && !slices.Contains(vips, ip) {
			vips = append(vips, ip)
		}
	}
	p.VIPs = vips
	if p.VIPs == nil {
		p.VIPs = []string{}
	}
	return p
}

// NewContext returns the conversion context of an OpenShift cluster on OpenStack: the
// cluster name and virtual IPs from its Infrastructure object, OpenShift's namespaces.
func NewContext(infra *configv1.Infrastructure) (convert.Context, error) {
	name, err := convert.ClusterNameFromInfrastructure(infra)
	if err != nil {
		return convert.Context{}, err
	}
	p, err := FromInfrastructure(infra)
	if err != nil {
		return convert.Context{}, err
	}
	return convert.Context{ClusterName: name, Platform: p, Namespaces: convert.OpenShiftNamespaces}, nil
}

// Name is the platform's short name.
func (Platform) Name() string { return "openstack" }

// The OpenStack Machine API actuator's own annotations on a Machine: the server's ID and its
// status. They describe the instance (OpenStackMachine status says the same), so the
// conversion leaves them on the Machine API copy only.
const (
	ResourceIDAnnotation     = "openstack-resourceId"
	InstanceStatusAnnotation = "instance-status"
)

// ProviderOwnedAnnotations implements convert.ProviderOwnedMetadata.
func (Platform) ProviderOwnedAnnotations() []string {
	return []string{ResourceIDAnnotation, InstanceStatusAnnotation}
}

// kinds is the plumbing between the OpenStackMachine and OpenStackMachineTemplate and their spec.
var kinds = convert.NewInfraKinds(convert.InfraTypes[capov1.OpenStackMachine, capov1.OpenStackMachineTemplate, capov1.OpenStackMachineSpec]{
	Machine:      capov1.SchemeGroupVersion.WithKind("OpenStackMachine"),
	Template:     capov1.SchemeGroupVersion.WithKind("OpenStackMachineTemplate"),
	MachineSpec:  func(m *capov1.OpenStackMachine) *capov1.OpenStackMachineSpec { return &m.Spec },
	TemplateSpec: func(t *capov1.OpenStackMachineTemplate) *capov1.OpenStackMachineSpec { return &t.Spec.Template.Spec },
	ProviderID:   convert.PointerProviderID(func(s *capov1.OpenStackMachineSpec) **string { return &s.ProviderID }),
	Instance:     "server",
})

// InfraMachineGVK is the Cluster API infrastructure kind of a Machine.
func (Platform) InfraMachineGVK() schema.GroupVersionKind { return kinds.InfraMachineGVK() }

// InfraMachineTemplateGVK is the Cluster API infrastructure kind of a MachineSet's template.
func (Platform) InfraMachineTemplateGVK() schema.GroupVersionKind {
	return kinds.InfraMachineTemplateGVK()
}

// NewInfraMachine wraps spec (an *OpenStackMachineSpec) in an OpenStackMachine carrying providerID.
func (Platform) NewInfraMachine(spec convert.InfraSpec, providerID string) client.Object {
	return kinds.NewInfraMachine(spec, providerID)
}

// NewInfraMachineTemplate wraps spec (an *OpenStackMachineSpec) in an OpenStackMachineTemplate.
func (Platform) NewInfraMachineTemplate(spec convert.InfraSpec) client.Object {
	return kinds.NewInfraMachineTemplate(spec)
}

// SplitInfraMachine returns the spec (without providerID) and providerID of an OpenStackMachine.
func (Platform) SplitInfraMachine(obj client.Object, path *field.Path, r *convert.Report) (convert.InfraSpec, string, bool) {
	return kinds.SplitInfraMachine(obj, path, r)
}

// SplitInfraMachineTemplate returns the machine spec of an OpenStackMachineTemplate.
func (Platform) SplitInfraMachineTemplate(obj client.Object, path *field.Path, r *convert.Report) (convert.InfraSpec, bool) {
	return kinds.SplitInfraMachineTemplate(obj, path, r)
}

func (p Platform) secretNamespace() string {
	if p.SecretNamespace == "" {
		return DefaultSecretNamespace
	}
	return p.SecretNamespace
}
