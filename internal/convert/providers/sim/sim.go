// Package sim converts the simulated provider's Machine API providerSpec
// (SimMachineProviderSpec) to and from its Cluster API infrastructure kinds (SimMachine,
// SimMachineTemplate). The region is per cluster in the Cluster API (SimCluster.spec.region).
package sim

import (
	"errors"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	simv1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/convert"
)

// ProviderSpecKind is the kind of the providerSpec value.
const ProviderSpecKind = "SimMachineProviderSpec"

// Platform is the simulated provider's convert.Platform.
type Platform struct {
	// Region is the SimCluster's spec.region.
	Region string
}

var _ convert.Platform = Platform{}

// New returns the platform for a cluster in region.
func New(region string) (Platform, error) {
	if region == "" {
		return Platform{}, errors.New("sim: the cluster region is required")
	}
	return Platform{Region: region}, nil
}

// FromSimCluster returns the platform for the cluster a SimCluster describes.
func FromSimCluster(sc *simv1.SimCluster) (Platform, error) {
	if sc == nil {
		return Platform{}, errors.New("sim: no SimCluster")
	}
	return New(sc.Spec.Region)
}

// Name is the platform's short name.
func (Platform) Name() string { return "sim" }

// kinds is the plumbing between the SimMachine and SimMachineTemplate and their spec.
var kinds = convert.NewInfraKinds(convert.InfraTypes[simv1.SimMachine, simv1.SimMachineTemplate, simv1.SimMachineSpec]{
	Machine:      simv1.GroupVersion.WithKind("SimMachine"),
	Template:     simv1.GroupVersion.WithKind("SimMachineTemplate"),
	MachineSpec:  func(m *simv1.SimMachine) *simv1.SimMachineSpec { return &m.Spec },
	TemplateSpec: func(t *simv1.SimMachineTemplate) *simv1.SimMachineSpec { return &t.Spec.Template.Spec },
	TemplateMetadata: func(t *simv1.SimMachineTemplate) (map[string]string, map[string]string) {
		return t.Spec.Template.ObjectMeta.Labels, t.Spec.Template.ObjectMeta.Annotations
	},
	ProviderID: convert.StringProviderID(func(s *simv1.SimMachineSpec) *string { return &s.ProviderID }),
	Instance:   "instance",
})

// InfraMachineGVK is the Cluster API infrastructure kind of a Machine.
func (Platform) InfraMachineGVK() schema.GroupVersionKind { return kinds.InfraMachineGVK() }

// InfraMachineTemplateGVK is the Cluster API infrastructure kind of a MachineSet's template.
func (Platform) InfraMachineTemplateGVK() schema.GroupVersionKind {
	return kinds.InfraMachineTemplateGVK()
}

// NewInfraMachine wraps spec (a *SimMachineSpec) in a SimMachine carrying providerID.
func (Platform) NewInfraMachine(spec convert.InfraSpec, providerID string) client.Object {
	return kinds.NewInfraMachine(spec, providerID)
}

// NewInfraMachineTemplate wraps spec (a *SimMachineSpec) in a SimMachineTemplate.
func (Platform) NewInfraMachineTemplate(spec convert.InfraSpec) client.Object {
	return kinds.NewInfraMachineTemplate(spec)
}

// SplitInfraMachine returns the spec (without providerID) and providerID of a SimMachine.
func (Platform) SplitInfraMachine(obj client.Object, path *field.Path, r *convert.Report) (convert.InfraSpec, string, bool) {
	return kinds.SplitInfraMachine(obj, path, r)
}

// SplitInfraMachineTemplate returns the machine spec of a SimMachineTemplate.
func (Platform) SplitInfraMachineTemplate(obj client.Object, path *field.Path, r *convert.Report) (convert.InfraSpec, bool) {
	return kinds.SplitInfraMachineTemplate(obj, path, r)
}

// NewContext returns the conversion context of a simulated cluster: its Cluster API name
// (the Infrastructure's status.infrastructureName in a lab) and its SimCluster.
func NewContext(clusterName string, sc *simv1.SimCluster) (convert.Context, error) {
	if clusterName == "" {
		return convert.Context{}, errors.New("sim: the cluster name is required")
	}
	p, err := FromSimCluster(sc)
	if err != nil {
		return convert.Context{}, err
	}
	return convert.Context{ClusterName: clusterName, Platform: p, Namespaces: convert.OpenShiftNamespaces}, nil
}
