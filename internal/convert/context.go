package convert

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kjson "sigs.k8s.io/json"
)

// The two APIs' display names, used in messages.
const (
	MachineAPI = "the Machine API"
	ClusterAPI = "the Cluster API"
)

// Context describes the cluster a conversion happens in: values the Cluster API keeps once per
// cluster and the Machine API repeats on every object.
type Context struct {
	// ClusterName is the name of the Cluster API Cluster (on OpenShift the Infrastructure's
	// status.infrastructureName). It becomes spec.clusterName and the
	// cluster.x-k8s.io/cluster-name label; Machine API objects carry it in the
	// machine.openshift.io/cluster-api-cluster label.
	ClusterName string

	// Platform converts providerSpec values to InfraMachines and back. It may be nil when only
	// MachineHealthChecks are converted.
	Platform Platform

	// Namespaces maps the Machine API namespace to the Cluster API one. Objects in other
	// namespaces keep their namespace. Leave empty to keep every namespace.
	Namespaces Namespaces

	// AdditionalSyncMachineLabels are the label key patterns the Cluster API machine
	// controller was started with (--additional-sync-machine-labels): Machine API node labels
	// (spec.metadata.labels) matching them can be carried, like node-role.kubernetes.io/*.
	AdditionalSyncMachineLabels []*regexp.Regexp
}

// Namespaces pairs the namespace Machine API objects live in with the namespace their Cluster
// API counterparts live in, e.g. openshift-machine-api and openshift-cluster-api.
type Namespaces struct {
	MachineAPI string
	ClusterAPI string
}

// OpenShiftNamespaces is the namespace pair of an OpenShift cluster.
var OpenShiftNamespaces = Namespaces{MachineAPI: "openshift-machine-api", ClusterAPI: "openshift-cluster-api"}

// ClusterNameFromInfrastructure returns the cluster name of an OpenShift Infrastructure object.
func ClusterNameFromInfrastructure(infra *configv1.Infrastructure) (string, error) {
	if infra == nil {
		return "", errors.New("no Infrastructure object")
	}
	if infra.Status.InfrastructureName == "" {
		return "", fmt.Errorf("the Infrastructure %q has no status.infrastructureName", infra.Name)
	}
	return infra.Status.InfrastructureName, nil
}

// MachineValues are the values the Machine API keeps in the providerSpec but the Cluster API
// keeps on the Machine itself.
type MachineValues struct {
	// FailureDomain is the zone: Machine.spec.failureDomain in the Cluster API.
	FailureDomain string
	// DataSecretName is the user data secret: Machine.spec.bootstrap.dataSecretName.
	DataSecretName *string
	// ControlPlane marks a control-plane Machine: the cluster.x-k8s.io/control-plane label on
	// the Cluster API Machine. Only platforms implementing ControlPlaneMarker set or read it.
	ControlPlane bool
}

// ControlPlaneMarker is implemented by platforms whose providerSpec says that a Machine is
// part of the control plane (on AWS: its loadBalancers). For them the
// cluster.x-k8s.io/control-plane label of the Cluster API Machine is not an ordinary label:
// it travels as MachineValues.ControlPlane. On other platforms the label is copied as is.
type ControlPlaneMarker interface {
	// MarksControlPlane reports whether the platform converts the control-plane label.
	MarksControlPlane() bool
}

func marksControlPlane(p Platform) bool {
	m, ok := p.(ControlPlaneMarker)
	return ok && m.MarksControlPlane()
}

// ControlPlaneRole is implemented by platforms whose Machine API actuator treats a Machine of
// role master (the machine.openshift.io/cluster-api-machine-role label) as part of the control
// plane, or whose control-plane Machines cannot be converted at all. For them the role and the
// Cluster API's cluster.x-k8s.io/control-plane label are converted into each other, or refused.
type ControlPlaneRole interface {
	// ControlPlaneRole says whether the role converts on this cluster.
	ControlPlaneRole() RoleCheck
}

// RoleCheck is a platform's answer to whether control-plane Machines convert.
type RoleCheck struct {
	// Converts is true when the actuator and the Cluster API provider put a control-plane
	// instance behind the same API server endpoints: role master and the control-plane label
	// are then converted into each other. When false, control-plane Machines are refused.
	Converts bool
	// Why explains a refusal; with Converts it is a warning (e.g. the cluster object that decides
	// is not known offline, so the endpoints were not checked).
	Why string
}

func controlPlaneRole(p Platform) (RoleCheck, bool) {
	if m, ok := p.(ControlPlaneRole); ok {
		return m.ControlPlaneRole(), true
	}
	return RoleCheck{}, false
}

// ControlPlaneInfra is implemented by platforms that convert a control-plane Machine's
// providerSpec differently from a worker's (on Azure: the load balancers its network interface
// joins). A Machine API Machine of role master, and a Cluster API Machine with the
// cluster.x-k8s.io/control-plane label, are converted with the platform ForControlPlane returns.
type ControlPlaneInfra interface {
	// ForControlPlane returns the platform that converts control-plane Machines.
	ForControlPlane() Platform
}

// infraPlatform is the platform converting a Machine's providerSpec: ForControlPlane's for a
// control-plane Machine on a platform implementing ControlPlaneInfra, else the context's.
func (c *Context) infraPlatform(controlPlane bool) Platform {
	if cp, ok := c.Platform.(ControlPlaneInfra); ok && controlPlane {
		return cp.ForControlPlane()
	}
	return c.Platform
}

// InfraSpec is a platform's InfraMachine spec, e.g. *v1alpha1.SimMachineSpec or
// *v1beta2.AWSMachineSpec, with the providerID left empty.
type InfraSpec any

// InfraSpecAs is how a platform's FromInfra takes spec: as its own InfraMachine spec type T,
// or, when the core handed it anything else, an internal error under path.
func InfraSpecAs[T any](spec InfraSpec, path *field.Path, r *Report) (*T, bool) {
	s, ok := spec.(*T)
	if !ok || s == nil {
		r.Error(field.InternalError(path, fmt.Errorf("the InfraMachine spec is a %T, not a %T", spec, s)))
		return nil, false
	}
	return s, true
}

// InfraPaths are the roots a platform reports Cluster API → Machine API problems under.
type InfraPaths struct {
	// Infra is the path of the InfraMachine spec (e.g. "AWSMachine.spec" or
	// "AWSMachineTemplate.spec.template.spec").
	Infra *field.Path
	// Machine is the path of the Cluster API Machine spec the MachineValues came from.
	Machine *field.Path
	// Metadata is the path of that Machine's metadata (its labels carry ControlPlane).
	Metadata *field.Path
}

// Platform converts the infrastructure-specific part of a Machine. Implementations live in
// the providers subpackages; one file per direction.
type Platform interface {
	// Name is a short identifier, e.g. "aws".
	Name() string
	// InfraMachineGVK and InfraMachineTemplateGVK are the Cluster API infrastructure kinds.
	InfraMachineGVK() schema.GroupVersionKind
	InfraMachineTemplateGVK() schema.GroupVersionKind

	// ToInfra converts a providerSpec.value (path is its field path) into the platform's
	// InfraMachine spec and the values the Cluster API keeps on the Machine.
	ToInfra(value *runtime.RawExtension, path *field.Path, r *Report) (InfraSpec, MachineValues)
	// FromInfra converts an InfraMachine spec and the Machine's values back into a
	// providerSpec.value.
	FromInfra(spec InfraSpec, mv MachineValues, paths InfraPaths, r *Report) *runtime.RawExtension

	// NewInfraMachine wraps spec in an InfraMachine (type meta and spec only) carrying providerID.
	NewInfraMachine(spec InfraSpec, providerID string) client.Object
	// NewInfraMachineTemplate wraps spec in an InfraMachineTemplate (type meta and spec only).
	NewInfraMachineTemplate(spec InfraSpec) client.Object
	// SplitInfraMachine returns the spec and providerID of an InfraMachine of this platform,
	// reporting inconsistencies under path (the InfraMachine's "spec"). ok is false when obj
	// is not this platform's InfraMachine kind.
	SplitInfraMachine(obj client.Object, path *field.Path, r *Report) (spec InfraSpec, providerID string, ok bool)
	// SplitInfraMachineTemplate is SplitInfraMachine for templates; path is the template's "spec".
	SplitInfraMachineTemplate(obj client.Object, path *field.Path, r *Report) (spec InfraSpec, ok bool)
}

// DecodeProviderSpec decodes a providerSpec.value into out. Fields the target type does not
// know are reported as warnings (the Machine API ignores them too); malformed values are errors.
// It returns false if nothing usable was decoded.
func DecodeProviderSpec(value *runtime.RawExtension, out any, path *field.Path, r *Report) bool {
	if value == nil || (value.Raw == nil && value.Object == nil) {
		r.Error(field.Required(path, "a providerSpec value is required"))
		return false
	}
	raw := value.Raw
	if raw == nil {
		b, err := json.Marshal(value.Object)
		if err != nil {
			r.Error(field.Invalid(path, "<object>", err.Error()))
			return false
		}
		raw = b
	}
	strict, err := kjson.UnmarshalStrict(raw, out, kjson.DisallowUnknownFields)
	if err != nil {
		r.Error(field.Invalid(path, string(truncate(raw, 80)), "cannot decode: "+err.Error()))
		return false
	}
	for _, e := range strict {
		r.Warn(path, "ignored: %v", e)
	}
	return true
}

func truncate(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	return append(append([]byte{}, b[:n]...), "..."...)
}

// Encode marshals a providerSpec value. Platforms use it in FromInfra.
func Encode(v any, path *field.Path, r *Report) *runtime.RawExtension {
	b, err := json.Marshal(v)
	if err != nil {
		r.Error(field.InternalError(path, fmt.Errorf("cannot encode %T: %w", v, err)))
		return nil
	}
	return &runtime.RawExtension{Raw: b}
}
