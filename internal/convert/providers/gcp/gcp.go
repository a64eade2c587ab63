// Package gcp converts the Machine API GCPMachineProviderSpec (machine.openshift.io/v1beta1)
// to and from the Cluster API Provider GCP (CAPG, infrastructure.cluster.x-k8s.io/v1beta1)
// GCPMachine and GCPMachineTemplate.
//
// CAPG keeps per cluster what the Machine API repeats on every providerSpec: the project and
// region (GCPCluster spec.project and spec.region), the credentials (GCPCluster
// spec.credentialsRef) and the VPC network every instance joins (GCPCluster spec.network).
// On OpenShift the project and region come from the Infrastructure object; the network is
// known only from the GCPCluster.
package gcp

import (
	"errors"
	"fmt"
	"regexp"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	capgv1 "sigs.k8s.io/cluster-api-provider-gcp/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
)

const (
	// ProviderSpecKind is the kind of the providerSpec value.
	ProviderSpecKind = "GCPMachineProviderSpec"
	// DefaultCredentialsSecret is the credentials secret OpenShift's Machine API uses on GCP.
	DefaultCredentialsSecret = "gcp-cloud-credentials" //nolint:gosec // a Secret's name, not a credential
	// legacyAPIVersion is the providerSpec apiVersion of older OpenShift releases.
	legacyAPIVersion = "gcpprovider.openshift.io/v1beta1"
)

// Network is the VPC network CAPG puts every instance of a cluster on: the GCPCluster's
// spec.network.name, in spec.network.hostProject (a shared VPC) or else spec.project.
type Network struct {
	Name    string
	Project string
}

// Platform is the GCP convert.Platform.
type Platform struct {
	// Region is the cluster's region (Infrastructure status.platformStatus.gcp.region,
	// GCPCluster spec.region).
	Region string
	// Project is the cluster's project ID (status.platformStatus.gcp.projectID, GCPCluster
	// spec.project); "" when not known.
	Project string
	// Network is the GCPCluster's network; nil when it is not known (offline without the
	// GCPCluster). Machines are then converted with their network unchecked, and cannot be
	// converted back.
	Network *Network
	// CredentialsSecret is the Machine API credentials secret name; CAPG takes credentials
	// from the GCPCluster instead. Defaults to DefaultCredentialsSecret.
	CredentialsSecret string
	// ControlPlaneGroupTag is the middle of the name of the instance groups CAPG adds
	// control-plane Machines to (<cluster>-<tag>-<zone>): the GCPCluster's
	// spec.loadBalancer.apiServerInstanceGroupTagOverride, else "apiserver"; "" when the
	// GCPCluster is not known.
	ControlPlaneGroupTag string
}

var _ convert.Platform = Platform{}

// New returns the platform for a cluster in region whose project and network are not known.
func New(region string) (Platform, error) {
	if region == "" {
		return Platform{}, errors.New("gcp: the cluster region is required")
	}
	return Platform{Region: region, CredentialsSecret: DefaultCredentialsSecret}, nil
}

// FromInfrastructure returns the platform of an OpenShift cluster on GCP.
func FromInfrastructure(infra *configv1.Infrastructure) (Platform, error) {
	if infra == nil {
		return Platform{}, errors.New("gcp: no Infrastructure object")
	}
	ps := infra.Status.PlatformStatus
	if ps == nil || ps.Type != configv1.GCPPlatformType || ps.GCP == nil {
		return Platform{}, fmt.Errorf("gcp: Infrastructure %q has no GCP platform status", infra.Name)
	}
	p, err := New(ps.GCP.Region)
	if err != nil {
		return Platform{}, err
	}
	return p.WithInfrastructure(infra), nil
}

// WithInfrastructure returns p with the project an Infrastructure names. The region is not
// changed; an Infrastructure without GCP platform status leaves p unchanged.
func (p Platform) WithInfrastructure(infra *configv1.Infrastructure) Platform {
	if ps := infra.Status.PlatformStatus; ps != nil && ps.GCP != nil && ps.GCP.ProjectID != "" {
		p.Project = ps.GCP.ProjectID
	}
	return p
}

// WithGCPCluster returns p with the GCPCluster's project (when p has none) and network. The
// region is not changed.
func (p Platform) WithGCPCluster(c *capgv1.GCPCluster) Platform {
	if p.Project == "" {
		p.Project = c.Spec.Project
	}
	p.Network = NetworkOf(c)
	p.ControlPlaneGroupTag = ptr.Deref(c.Spec.LoadBalancer.APIServerInstanceGroupTagOverride, capgv1.APIServerRoleTagValue)
	return p
}

// masterGroupTag is the middle of the name of the instance groups OpenShift's GCP actuator adds
// Machines of role master to (<cluster>-master-<zone>, behind <cluster>-api-internal).
const masterGroupTag = "master"

// ControlPlaneRole converts role master to the control-plane label when CAPG adds control-plane
// Machines to the same instance groups as the Machine API's actuator.
func (p Platform) ControlPlaneRole() convert.RoleCheck {
	const field = "spec.loadBalancer.apiServerInstanceGroupTagOverride"
	switch p.ControlPlaneGroupTag {
	case "":
		return convert.RoleCheck{Converts: true, Why: "the GCPCluster is not known, so it was not checked that CAPG adds control-plane Machines to the installer's instance groups <cluster>-master-<zone> (it does when the GCPCluster's " + field + " is master)"}
	case masterGroupTag:
		return convert.RoleCheck{Converts: true}
	}
	return convert.RoleCheck{Why: "the Machine API adds Machines of role master to the instance groups <cluster>-master-<zone>, CAPG adds control-plane Machines to <cluster>-" + p.ControlPlaneGroupTag + "-<zone>; set the GCPCluster's " + field + " to master to convert them"}
}

// NetworkOf returns the network CAPG puts a GCPCluster's instances on.
func NetworkOf(c *capgv1.GCPCluster) *Network {
	n := c.Spec.Network
	return &Network{Name: ptr.Deref(n.Name, "default"), Project: ptr.Deref(n.HostProject, c.Spec.Project)}
}

// FromGCPCluster returns the platform of the cluster a GCPCluster describes.
func FromGCPCluster(c *capgv1.GCPCluster) (Platform, error) {
	if c == nil {
		return Platform{}, errors.New("gcp: no GCPCluster")
	}
	p, err := New(c.Spec.Region)
	if err != nil {
		return Platform{}, err
	}
	return p.WithGCPCluster(c), nil
}

// NewContext returns the conversion context of an OpenShift cluster on GCP: the cluster name,
// region and project from its Infrastructure object, OpenShift's namespaces.
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
func (Platform) Name() string { return "gcp" }

// kinds is the plumbing between the GCPMachine and GCPMachineTemplate and their spec.
var kinds = convert.NewInfraKinds(convert.InfraTypes[capgv1.GCPMachine, capgv1.GCPMachineTemplate, capgv1.GCPMachineSpec]{
	Machine:      capgv1.GroupVersion.WithKind("GCPMachine"),
	Template:     capgv1.GroupVersion.WithKind("GCPMachineTemplate"),
	MachineSpec:  func(m *capgv1.GCPMachine) *capgv1.GCPMachineSpec { return &m.Spec },
	TemplateSpec: func(t *capgv1.GCPMachineTemplate) *capgv1.GCPMachineSpec { return &t.Spec.Template.Spec },
	TemplateMetadata: func(t *capgv1.GCPMachineTemplate) (map[string]string, map[string]string) {
		return t.Spec.Template.ObjectMeta.Labels, t.Spec.Template.ObjectMeta.Annotations
	},
	ProviderID: convert.PointerProviderID(func(s *capgv1.GCPMachineSpec) **string { return &s.ProviderID }),
	Instance:   "instance",
})

// InfraMachineGVK is the Cluster API infrastructure kind of a Machine.
func (Platform) InfraMachineGVK() schema.GroupVersionKind { return kinds.InfraMachineGVK() }

// InfraMachineTemplateGVK is the Cluster API infrastructure kind of a MachineSet's template.
func (Platform) InfraMachineTemplateGVK() schema.GroupVersionKind {
	return kinds.InfraMachineTemplateGVK()
}

// NewInfraMachine wraps spec (a *GCPMachineSpec) in a GCPMachine carrying providerID.
func (Platform) NewInfraMachine(spec convert.InfraSpec, providerID string) client.Object {
	return kinds.NewInfraMachine(spec, providerID)
}

// NewInfraMachineTemplate wraps spec (a *GCPMachineSpec) in a GCPMachineTemplate.
func (Platform) NewInfraMachineTemplate(spec convert.InfraSpec) client.Object {
	return kinds.NewInfraMachineTemplate(spec)
}

// SplitInfraMachine returns the spec (without providerID) and providerID of a GCPMachine.
func (Platform) SplitInfraMachine(obj client.Object, path *field.Path, r *convert.Report) (convert.InfraSpec, string, bool) {
	return kinds.SplitInfraMachine(obj, path, r)
}

// SplitInfraMachineTemplate returns the machine spec of a GCPMachineTemplate.
func (Platform) SplitInfraMachineTemplate(obj client.Object, path *field.Path, r *convert.Report) (convert.InfraSpec, bool) {
	return kinds.SplitInfraMachineTemplate(obj, path, r)
}

func (p Platform) credentialsSecret() string {
	if p.CredentialsSecret == "" {
		return DefaultCredentialsSecret
	}
	return p.CredentialsSecret
}

// zoneRegion matches the region at the start of a zone name: us-central1-a, europe-west4-b.
var zoneRegion = regexp.MustCompile(`^([a-z]+(?:-[a-z]+)*[0-9]+)-[a-z]$`)

// ZoneRegion returns the region a GCP zone lies in, "" when the name does not look like one.
func ZoneRegion(zone string) string {
	m := zoneRegion.FindStringSubmatch(zone)
	if m == nil {
		return ""
	}
	return m[1]
}
