// Package vsphere converts the Machine API VSphereMachineProviderSpec (machine.openshift.io/v1beta1)
// to and from the Cluster API Provider vSphere (CAPV, infrastructure.cluster.x-k8s.io/v1beta2)
// VSphereMachine and VSphereMachineTemplate.
//
// Both actuators clone a VM from a template with the placement the spec names (vCenter,
// datacenter, folder, datastore, resource pool), so most fields copy across. What differs:
// CAPV takes credentials and the TLS thumbprint from the VSphereCluster, fills an empty server
// from it, and replaces the placement with a VSphereDeploymentZone's when the Machine names a
// failure domain; the Machine API names the credentials secret on every providerSpec and has
// no failure domains. On OpenShift the vCenters come from the Infrastructure object.
package vsphere

import (
	"errors"
	"slices"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	capvv1 "sigs.k8s.io/cluster-api-provider-vsphere/api/govmomi/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
)

const (
	// ProviderSpecKind is the kind of the providerSpec value.
	ProviderSpecKind = "VSphereMachineProviderSpec"
	// DefaultCredentialsSecret is the credentials secret OpenShift's Machine API uses on vSphere.
	DefaultCredentialsSecret = "vsphere-cloud-credentials" //nolint:gosec // a Secret's name, not a credential
	// legacyAPIVersion is the providerSpec apiVersion of older OpenShift releases.
	legacyAPIVersion = "vsphereprovider.openshift.io/v1beta1"
)

// Platform is the vSphere convert.Platform.
type Platform struct {
	// VCenters are the vCenter servers of the cluster (Infrastructure
	// spec.platformSpec.vsphere.vcenters[].server); nil when not known. A Machine naming another
	// server is refused.
	VCenters []string
	// ClusterServer is the VSphereCluster's spec.server, which CAPV uses for a VSphereMachine
	// naming none; "" when not known.
	ClusterServer string
	// CredentialsSecret is the Machine API credentials secret name; CAPV takes credentials
	// from the VSphereCluster's identityRef or its own. Defaults to DefaultCredentialsSecret.
	CredentialsSecret string
}

var _ convert.Platform = Platform{}

// New returns the platform of a cluster whose vCenters are not known.
func New() Platform { return Platform{CredentialsSecret: DefaultCredentialsSecret} }

// WithInfrastructure returns p with the vCenters an Infrastructure names; one without vSphere
// platform spec leaves p unchanged.
func (p Platform) WithInfrastructure(infra *configv1.Infrastructure) Platform {
	vs := infra.Spec.PlatformSpec.VSphere
	if vs == nil || len(vs.VCenters) == 0 {
		return p
	}
	p.VCenters = nil
	for _, vc := range vs.VCenters {
		p.VCenters = append(p.VCenters, vc.Server)
	}
	return p
}

// WithVSphereCluster returns p with the VSphereCluster's server.
func (p Platform) WithVSphereCluster(c *capvv1.VSphereCluster) Platform {
	p.ClusterServer = c.Spec.Server
	return p
}

// NewContext returns the conversion context of an OpenShift cluster on vSphere: the cluster
// name and vCenters from its Infrastructure object, OpenShift's namespaces.
func NewContext(infra *configv1.Infrastructure) (convert.Context, error) {
	name, err := convert.ClusterNameFromInfrastructure(infra)
	if err != nil {
		return convert.Context{}, err
	}
	if ps := infra.Status.PlatformStatus; ps == nil || ps.Type != configv1.VSpherePlatformType {
		return convert.Context{}, errors.New("vsphere: the Infrastructure " + infra.Name + " is not on vSphere")
	}
	return convert.Context{ClusterName: name, Platform: New().WithInfrastructure(infra), Namespaces: convert.OpenShiftNamespaces}, nil
}

// ControlPlaneRole converts role master to the control-plane label: on vSphere neither
// actuator puts a control-plane VM behind a load balancer (OpenShift serves the API virtual IP
// from the nodes themselves, keepalived), so a master's providerSpec is a worker's.
func (Platform) ControlPlaneRole() convert.RoleCheck { return convert.RoleCheck{Converts: true} }

// Name is the platform's short name.
func (Platform) Name() string { return "vsphere" }

// kinds is the plumbing between the VSphereMachine and VSphereMachineTemplate and their spec.
var kinds = convert.NewInfraKinds(convert.InfraTypes[capvv1.VSphereMachine, capvv1.VSphereMachineTemplate, capvv1.VSphereMachineSpec]{
	Machine:      capvv1.GroupVersion.WithKind("VSphereMachine"),
	Template:     capvv1.GroupVersion.WithKind("VSphereMachineTemplate"),
	MachineSpec:  func(m *capvv1.VSphereMachine) *capvv1.VSphereMachineSpec { return &m.Spec },
	TemplateSpec: func(t *capvv1.VSphereMachineTemplate) *capvv1.VSphereMachineSpec { return &t.Spec.Template.Spec },
	TemplateMetadata: func(t *capvv1.VSphereMachineTemplate) (map[string]string, map[string]string) {
		return t.Spec.Template.ObjectMeta.Labels, t.Spec.Template.ObjectMeta.Annotations
	},
	ProviderID: convert.StringProviderID(func(s *capvv1.VSphereMachineSpec) *string { return &s.ProviderID }),
	Instance:   "VM",
})

// InfraMachineGVK is the Cluster API infrastructure kind of a Machine.
func (Platform) InfraMachineGVK() schema.GroupVersionKind { return kinds.InfraMachineGVK() }

// InfraMachineTemplateGVK is the Cluster API infrastructure kind of a MachineSet's template.
func (Platform) InfraMachineTemplateGVK() schema.GroupVersionKind {
	return kinds.InfraMachineTemplateGVK()
}

// NewInfraMachine wraps spec (a *VSphereMachineSpec) in a VSphereMachine carrying providerID.
func (Platform) NewInfraMachine(spec convert.InfraSpec, providerID string) client.Object {
	return kinds.NewInfraMachine(spec, providerID)
}

// NewInfraMachineTemplate wraps spec (a *VSphereMachineSpec) in a VSphereMachineTemplate.
func (Platform) NewInfraMachineTemplate(spec convert.InfraSpec) client.Object {
	return kinds.NewInfraMachineTemplate(spec)
}

// SplitInfraMachine returns the spec (without providerID) and providerID of a VSphereMachine.
func (Platform) SplitInfraMachine(obj client.Object, path *field.Path, r *convert.Report) (convert.InfraSpec, string, bool) {
	return kinds.SplitInfraMachine(obj, path, r)
}

// SplitInfraMachineTemplate returns the machine spec of a VSphereMachineTemplate.
func (Platform) SplitInfraMachineTemplate(obj client.Object, path *field.Path, r *convert.Report) (convert.InfraSpec, bool) {
	return kinds.SplitInfraMachineTemplate(obj, path, r)
}

func (p Platform) credentialsSecret() string {
	if p.CredentialsSecret == "" {
		return DefaultCredentialsSecret
	}
	return p.CredentialsSecret
}

// knownServer reports whether server is one of the cluster's vCenters, true when they are not known.
func (p Platform) knownServer(server string) bool {
	return p.VCenters == nil || slices.Contains(p.VCenters, server)
}
