// Package powervs converts the Machine API PowerVSMachineProviderConfig (machine.openshift.io/v1)
// to and from the Cluster API Provider IBM Cloud (CAPIBM, infrastructure.cluster.x-k8s.io/v1beta3)
// IBMPowerVSMachine and IBMPowerVSMachineTemplate.
//
// Both actuators create a Power Virtual Server instance named like the Machine in a PowerVS
// workspace (a "service instance"), from an image and on a network of that workspace, with the
// bootstrap data as user data. CAPIBM keeps per cluster what the Machine API repeats on every
// providerSpec: the credentials (the controller's own) and, for a Machine whose serviceInstance
// gives no ID, the workspace: CAPIBM then ignores the Machine's serviceInstance and uses the
// IBMPowerVSCluster's (spec.serviceInstance.name, else "<IBMPowerVSCluster name>-serviceInstance").
// That name is known only from the IBMPowerVSCluster.
//
// The two APIs default differently what a providerSpec leaves unset (the Machine API's webhook:
// 32 GiB and 0.5 or 1 processors; CAPIBM's: 2 GiB and 0.25 processors), so the converter writes
// the defaults of the side it reads from, with a warning.
package powervs

import (
	"errors"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	capibmv1 "sigs.k8s.io/cluster-api-provider-ibmcloud/api/powervs/v1beta3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
)

const (
	// ProviderSpecKind is the kind of the providerSpec value.
	ProviderSpecKind = "PowerVSMachineProviderConfig"
	// DefaultCredentialsSecret is the credentials secret OpenShift's Machine API uses on PowerVS.
	DefaultCredentialsSecret = "powervs-credentials" //nolint:gosec // a Secret's name, not a credential
	// serviceInstanceSuffix is what CAPIBM appends to the IBMPowerVSCluster's name to name the
	// workspace when the IBMPowerVSCluster's spec.serviceInstance names none.
	serviceInstanceSuffix = "-serviceInstance"
)

// Platform is the PowerVS convert.Platform.
type Platform struct {
	// ServiceInstanceName is the workspace CAPIBM creates an instance in when the
	// IBMPowerVSMachine's serviceInstance has no id: the IBMPowerVSCluster's
	// spec.serviceInstance.name, else "<IBMPowerVSCluster name>-serviceInstance". "" when it is
	// not known (offline without the IBMPowerVSCluster): Machine API workspaces given by name
	// are then converted unchecked, and Cluster API Machines without a serviceInstance cannot be
	// converted back.
	ServiceInstanceName string
	// CredentialsSecret is the Machine API credentials secret name; CAPIBM's controller uses
	// its own credentials instead. Defaults to DefaultCredentialsSecret.
	CredentialsSecret string
}

var _ convert.Platform = Platform{}

// New returns the platform of a cluster whose IBMPowerVSCluster is not known. PowerVS
// conversion needs no region: the workspace decides where an instance runs.
func New() Platform {
	return Platform{CredentialsSecret: DefaultCredentialsSecret}
}

// ServiceInstanceNameOf returns the name of the workspace CAPIBM creates the instances of an
// IBMPowerVSCluster's Machines in when they give no workspace ID.
func ServiceInstanceNameOf(c *capibmv1.IBMPowerVSCluster) string {
	if si := c.Spec.ServiceInstance; si != nil && si.Name != nil && *si.Name != "" {
		return *si.Name
	}
	return c.Name + serviceInstanceSuffix
}

// WithIBMPowerVSCluster returns p with the workspace an IBMPowerVSCluster gives its Machines.
func (p Platform) WithIBMPowerVSCluster(c *capibmv1.IBMPowerVSCluster) Platform {
	if c == nil {
		return p
	}
	p.ServiceInstanceName = ServiceInstanceNameOf(c)
	return p
}

// FromIBMPowerVSCluster returns the platform of the cluster an IBMPowerVSCluster describes.
func FromIBMPowerVSCluster(c *capibmv1.IBMPowerVSCluster) (Platform, error) {
	if c == nil {
		return Platform{}, errors.New("powervs: no IBMPowerVSCluster")
	}
	return New().WithIBMPowerVSCluster(c), nil
}

// NewContext returns the conversion context of an OpenShift cluster on PowerVS whose
// IBMPowerVSCluster is c (nil when not known): the cluster name from its Infrastructure
// object, OpenShift's namespaces.
func NewContext(infra *configv1.Infrastructure, c *capibmv1.IBMPowerVSCluster) (convert.Context, error) {
	name, err := convert.ClusterNameFromInfrastructure(infra)
	if err != nil {
		return convert.Context{}, err
	}
	return convert.Context{ClusterName: name, Platform: New().WithIBMPowerVSCluster(c), Namespaces: convert.OpenShiftNamespaces}, nil
}

// Name is the platform's short name.
func (Platform) Name() string { return "powervs" }

// ControlPlaneRole refuses control-plane Machines: the Machine API's actuator adds a master to
// the load balancers its providerSpec names, CAPIBM adds control-plane Machines to the
// IBMPowerVSCluster's load balancers' pools.
func (Platform) ControlPlaneRole() convert.RoleCheck {
	return convert.RoleCheck{Why: "the Machine API adds a master to the load balancers its providerSpec names (loadBalancers), CAPIBM adds a control-plane Machine to the IBMPowerVSCluster's spec.loadBalancers by their listeners' selectors"}
}

// kinds is the plumbing between the IBMPowerVSMachine and IBMPowerVSMachineTemplate and their spec.
var kinds = convert.NewInfraKinds(convert.InfraTypes[capibmv1.IBMPowerVSMachine, capibmv1.IBMPowerVSMachineTemplate, capibmv1.IBMPowerVSMachineSpec]{
	Machine:     capibmv1.GroupVersion.WithKind("IBMPowerVSMachine"),
	Template:    capibmv1.GroupVersion.WithKind("IBMPowerVSMachineTemplate"),
	MachineSpec: func(m *capibmv1.IBMPowerVSMachine) *capibmv1.IBMPowerVSMachineSpec { return &m.Spec },
	TemplateSpec: func(t *capibmv1.IBMPowerVSMachineTemplate) *capibmv1.IBMPowerVSMachineSpec {
		return &t.Spec.Template.Spec
	},
	TemplateMetadata: func(t *capibmv1.IBMPowerVSMachineTemplate) (map[string]string, map[string]string) {
		return t.Spec.Template.ObjectMeta.Labels, t.Spec.Template.ObjectMeta.Annotations
	},
	ProviderID: convert.StringProviderID(func(s *capibmv1.IBMPowerVSMachineSpec) *string { return &s.ProviderID }),
	Instance:   "instance",
})

// InfraMachineGVK is the Cluster API infrastructure kind of a Machine.
func (Platform) InfraMachineGVK() schema.GroupVersionKind { return kinds.InfraMachineGVK() }

// InfraMachineTemplateGVK is the Cluster API infrastructure kind of a MachineSet's template.
func (Platform) InfraMachineTemplateGVK() schema.GroupVersionKind {
	return kinds.InfraMachineTemplateGVK()
}

// NewInfraMachine wraps spec (an *IBMPowerVSMachineSpec) in an IBMPowerVSMachine carrying providerID.
func (Platform) NewInfraMachine(spec convert.InfraSpec, providerID string) client.Object {
	return kinds.NewInfraMachine(spec, providerID)
}

// NewInfraMachineTemplate wraps spec (an *IBMPowerVSMachineSpec) in an IBMPowerVSMachineTemplate.
func (Platform) NewInfraMachineTemplate(spec convert.InfraSpec) client.Object {
	return kinds.NewInfraMachineTemplate(spec)
}

// SplitInfraMachine returns the spec (without providerID) and providerID of an IBMPowerVSMachine.
func (Platform) SplitInfraMachine(obj client.Object, path *field.Path, r *convert.Report) (convert.InfraSpec, string, bool) {
	return kinds.SplitInfraMachine(obj, path, r)
}

// SplitInfraMachineTemplate returns the machine spec of an IBMPowerVSMachineTemplate.
func (Platform) SplitInfraMachineTemplate(obj client.Object, path *field.Path, r *convert.Report) (convert.InfraSpec, bool) {
	return kinds.SplitInfraMachineTemplate(obj, path, r)
}

func (p Platform) credentialsSecret() string {
	if p.CredentialsSecret == "" {
		return DefaultCredentialsSecret
	}
	return p.CredentialsSecret
}
