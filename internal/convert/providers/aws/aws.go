// Package aws converts the Machine API AWSMachineProviderConfig to and from the Cluster API
// Provider AWS (CAPA v2, v1beta2) AWSMachine and AWSMachineTemplate. The region and the
// cloud credentials are per cluster in CAPA (AWSCluster spec.region and identityRef); on
// OpenShift the region comes from the Infrastructure object.
package aws

import (
	"errors"
	"fmt"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	capav1 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
)

const (
	// ProviderSpecKind is the kind of the providerSpec value.
	ProviderSpecKind = "AWSMachineProviderConfig"
	// DefaultCredentialsSecret is the credentials secret OpenShift's Machine API uses on AWS.
	DefaultCredentialsSecret = "aws-cloud-credentials" //nolint:gosec // a Secret's name, not a credential
	// legacyAPIVersion is the providerSpec apiVersion of older OpenShift releases.
	legacyAPIVersion = "awsproviderconfig.openshift.io/v1beta1"
)

// Platform is the AWS convert.Platform.
type Platform struct {
	// Region is the cluster's AWS region (Infrastructure status.platformStatus.aws.region,
	// AWSCluster spec.region).
	Region string
	// CredentialsSecret is the Machine API credentials secret name; CAPA takes credentials
	// from the AWSCluster instead. Defaults to DefaultCredentialsSecret.
	CredentialsSecret string
	// IPFamily is the Infrastructure's status.platformStatus.aws.ipFamily. On a dual-stack
	// cluster the Machine API actuator gives every instance a primary IPv6 address and
	// resource-name private DNS; the AWSMachine says so explicitly.
	IPFamily configv1.IPFamilyType
	// ControlPlaneLoadBalancers are those of the cluster's AWSCluster, nil when it is not
	// known (offline without the AWSCluster). Control-plane Machines are checked against them
	// and get them back.
	ControlPlaneLoadBalancers *LoadBalancers
}

var _ convert.Platform = Platform{}

// New returns the platform for a cluster in region.
func New(region string) (Platform, error) {
	if region == "" {
		return Platform{}, errors.New("aws: the cluster region is required")
	}
	return Platform{Region: region, CredentialsSecret: DefaultCredentialsSecret}, nil
}

// FromInfrastructure returns the platform for an OpenShift cluster on AWS.
func FromInfrastructure(infra *configv1.Infrastructure) (Platform, error) {
	if infra == nil {
		return Platform{}, errors.New("aws: no Infrastructure object")
	}
	ps := infra.Status.PlatformStatus
	if ps == nil || ps.Type != configv1.AWSPlatformType || ps.AWS == nil {
		return Platform{}, fmt.Errorf("aws: Infrastructure %q has no AWS platform status", infra.Name)
	}
	p, err := New(ps.AWS.Region)
	if err != nil {
		return Platform{}, err
	}
	return p.WithInfrastructure(infra), nil
}

// WithInfrastructure returns p with what the Infrastructure says about every Machine: its
// ipFamily. The region is not changed.
func (p Platform) WithInfrastructure(infra *configv1.Infrastructure) Platform {
	if ps := infra.Status.PlatformStatus; ps != nil && ps.AWS != nil {
		p.IPFamily = ps.AWS.IPFamily
	}
	return p
}

// WithAWSCluster returns p with the AWSCluster's control-plane load balancers. The region is
// not changed.
func (p Platform) WithAWSCluster(c *capav1.AWSCluster) Platform {
	p.ControlPlaneLoadBalancers = ControlPlaneLoadBalancers(c)
	return p
}

// FromAWSCluster returns the platform for the cluster an AWSCluster describes.
func FromAWSCluster(c *capav1.AWSCluster) (Platform, error) {
	if c == nil {
		return Platform{}, errors.New("aws: no AWSCluster")
	}
	p, err := New(c.Spec.Region)
	if err != nil {
		return Platform{}, err
	}
	return p.WithAWSCluster(c), nil
}

// MarksControlPlane is true: a providerSpec with loadBalancers is a control-plane Machine.
func (Platform) MarksControlPlane() bool { return true }

// Name is the platform's short name.
func (Platform) Name() string { return "aws" }

// kinds is the plumbing between the AWSMachine and AWSMachineTemplate and their spec; the
// methods below add the instanceID CAPA records beside the providerID.
var kinds = convert.NewInfraKinds(convert.InfraTypes[capav1.AWSMachine, capav1.AWSMachineTemplate, capav1.AWSMachineSpec]{
	Machine:      capav1.GroupVersion.WithKind("AWSMachine"),
	Template:     capav1.GroupVersion.WithKind("AWSMachineTemplate"),
	MachineSpec:  func(m *capav1.AWSMachine) *capav1.AWSMachineSpec { return &m.Spec },
	TemplateSpec: func(t *capav1.AWSMachineTemplate) *capav1.AWSMachineSpec { return &t.Spec.Template.Spec },
	TemplateMetadata: func(t *capav1.AWSMachineTemplate) (map[string]string, map[string]string) {
		return t.Spec.Template.ObjectMeta.Labels, t.Spec.Template.ObjectMeta.Annotations
	},
	ProviderID: convert.PointerProviderID(func(s *capav1.AWSMachineSpec) **string { return &s.ProviderID }),
	Instance:   "instance",
})

// InfraMachineGVK is the Cluster API infrastructure kind of a Machine.
func (Platform) InfraMachineGVK() schema.GroupVersionKind { return kinds.InfraMachineGVK() }

// InfraMachineTemplateGVK is the Cluster API infrastructure kind of a MachineSet's template.
func (Platform) InfraMachineTemplateGVK() schema.GroupVersionKind {
	return kinds.InfraMachineTemplateGVK()
}

func (p Platform) credentialsSecret() string {
	if p.CredentialsSecret == "" {
		return DefaultCredentialsSecret
	}
	return p.CredentialsSecret
}

// NewInfraMachine wraps spec (an *AWSMachineSpec) in an AWSMachine. The instance ID is
// derived from providerID, as CAPA itself records it.
func (Platform) NewInfraMachine(spec convert.InfraSpec, providerID string) client.Object {
	m := kinds.NewInfraMachine(spec, providerID).(*capav1.AWSMachine)
	if id := instanceID(providerID); id != "" {
		m.Spec.InstanceID = ptr.To(id)
	}
	return m
}

// NewInfraMachineTemplate wraps spec (an *AWSMachineSpec) in an AWSMachineTemplate.
func (Platform) NewInfraMachineTemplate(spec convert.InfraSpec) client.Object {
	return kinds.NewInfraMachineTemplate(spec)
}

// SplitInfraMachine returns the spec (without providerID and instanceID) and providerID of
// an AWSMachine.
func (Platform) SplitInfraMachine(obj client.Object, path *field.Path, r *convert.Report) (convert.InfraSpec, string, bool) {
	spec, pid, ok := kinds.SplitInfraMachine(obj, path, r)
	if !ok {
		return nil, "", false
	}
	s := spec.(*capav1.AWSMachineSpec)
	if s.InstanceID != nil {
		switch derived := instanceID(pid); {
		case pid == "":
			r.Warn(path.Child("instanceID"), "dropped: without a providerID the Machine API cannot record it")
		case derived != *s.InstanceID:
			r.Error(field.Invalid(path.Child("instanceID"), *s.InstanceID, "does not match providerID "+pid))
		}
	} else if instanceID(pid) != "" {
		r.Warn(path.Child("instanceID"), "unset; converting back derives it from the providerID")
	}
	s.InstanceID = nil
	return s, pid, true
}

// SplitInfraMachineTemplate returns the machine spec of an AWSMachineTemplate, which names no
// instance by either ID.
func (Platform) SplitInfraMachineTemplate(obj client.Object, path *field.Path, r *convert.Report) (convert.InfraSpec, bool) {
	spec, ok := kinds.SplitInfraMachineTemplate(obj, path, r)
	if !ok {
		return nil, false
	}
	s := spec.(*capav1.AWSMachineSpec)
	if s.InstanceID != nil && *s.InstanceID != "" {
		r.Error(field.Invalid(path.Child("template", "spec", "instanceID"), *s.InstanceID, "a machine template cannot name one instance"))
	}
	s.InstanceID = nil
	return s, true
}

// instanceID extracts the EC2 instance ID from a providerID of the form
// aws:///<zone>/<instance-id> (or aws://<region>/<zone>/<instance-id>).
func instanceID(providerID string) string {
	rest, ok := strings.CutPrefix(providerID, "aws://")
	if !ok {
		return ""
	}
	i := strings.LastIndex(rest, "/")
	if i < 0 {
		return ""
	}
	id := rest[i+1:]
	if !strings.HasPrefix(id, "i-") {
		return ""
	}
	return id
}

// NewContext returns the conversion context of an OpenShift cluster on AWS: the cluster name
// and region from its Infrastructure object, OpenShift's namespaces.
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
