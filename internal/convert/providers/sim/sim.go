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

// InfraMachineGVK is the Cluster API infrastructure kind of a Machine.
func (Platform) InfraMachineGVK() schema.GroupVersionKind {
	return simv1.GroupVersion.WithKind("SimMachine")
}

// InfraMachineTemplateGVK is the Cluster API infrastructure kind of a MachineSet's template.
func (Platform) InfraMachineTemplateGVK() schema.GroupVersionKind {
	return simv1.GroupVersion.WithKind("SimMachineTemplate")
}

// NewInfraMachine wraps spec (a *SimMachineSpec) in a SimMachine.
func (p Platform) NewInfraMachine(spec convert.InfraSpec, providerID string) client.Object {
	m := &simv1.SimMachine{}
	m.SetGroupVersionKind(p.InfraMachineGVK())
	if s, ok := spec.(*simv1.SimMachineSpec); ok && s != nil {
		m.Spec = *s.DeepCopy()
	}
	m.Spec.ProviderID = providerID
	return m
}

// NewInfraMachineTemplate wraps spec (a *SimMachineSpec) in a SimMachineTemplate.
func (p Platform) NewInfraMachineTemplate(spec convert.InfraSpec) client.Object {
	t := &simv1.SimMachineTemplate{}
	t.SetGroupVersionKind(p.InfraMachineTemplateGVK())
	if s, ok := spec.(*simv1.SimMachineSpec); ok && s != nil {
		t.Spec.Template.Spec = *s.DeepCopy()
	}
	return t
}

// SplitInfraMachine returns the spec (without providerID) and providerID of a SimMachine.
func (Platform) SplitInfraMachine(obj client.Object, _ *field.Path, _ *convert.Report) (convert.InfraSpec, string, bool) {
	m, ok := obj.(*simv1.SimMachine)
	if !ok || m == nil {
		return nil, "", false
	}
	s := m.Spec.DeepCopy()
	id := s.ProviderID
	s.ProviderID = ""
	return s, id, true
}

// SplitInfraMachineTemplate returns the machine spec of a SimMachineTemplate.
func (Platform) SplitInfraMachineTemplate(obj client.Object, path *field.Path, r *convert.Report) (convert.InfraSpec, bool) {
	t, ok := obj.(*simv1.SimMachineTemplate)
	if !ok || t == nil {
		return nil, false
	}
	meta := path.Child("template", "metadata")
	if len(t.Spec.Template.ObjectMeta.Labels) > 0 || len(t.Spec.Template.ObjectMeta.Annotations) > 0 {
		r.Warn(meta, "labels and annotations for the SimMachines are dropped: the Machine API has no InfraMachines to put them on")
	}
	s := t.Spec.Template.Spec.DeepCopy()
	if s.ProviderID != "" {
		r.Error(field.Invalid(path.Child("template", "spec", "providerID"), s.ProviderID, "a machine template cannot name one instance"))
	}
	return s, true
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
