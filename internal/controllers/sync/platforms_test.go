package sync_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/aws/awsactuator"
	"github.com/machina-dev/machina/internal/controllers/sim/simactuator"
	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/provider"
	"github.com/machina-dev/machina/internal/testenv"
)

// platform is one infrastructure platform TestSync runs its platform-dependent subtests on
// (conversion, InfraMachine and InfraMachineTemplate mirrors, their pause, finalizers). Both
// platforms share one lab: the conversion context is picked per object by its providerSpec or
// infrastructure kind through the provider registry, the simulated provider reads its region
// from the SimCluster the Cluster "lab" references, and the AWS provider reads it from the
// Infrastructure, which the lab sets to AWS in us-east-1 (testenv.ServeAWSMachines). The platforms' objects
// are told apart by name prefix.
type platform struct {
	provider provider.Provider
	prefix   string
	// uidTag is the instance tag the platform's Machine API actuator records a Machine's UID in.
	uidTag string
	// zones are three zones of the cluster's region; types a small, a large and an xlarge
	// instance type.
	zones, types [3]string
	// spec is a providerSpec value in region and zone.
	spec func(region, zone, instanceType string) *runtime.RawExtension
	// region is the cluster's.
	region string
	// unconvertible is a providerSpec value the platform's actuator serves but the conversion
	// refuses, naming unconvertibleField: on sim another region than the cluster's; on aws an
	// AMI chosen by filters (CAPA takes an AMI ID only) — not another region, which the EC2
	// front, serving one region, would leave the AWS actuator unable to ever delete.
	unconvertible      *runtime.RawExtension
	unconvertibleField string
	// infraController says a controller of the platform's InfraMachines runs in the suite
	// (sim's, group "sim"; no CAPA runs here): its first pass over an unpaused InfraMachine
	// reports the Paused condition, a write.
	infraController bool
}

func (p platform) name(n string) string { return p.prefix + n }

func platforms() []platform {
	return []platform{
		{
			provider: provider.Sim(), prefix: "", uidTag: simactuator.TagMachineUID,
			zones: [3]string{"sim-east-1a", "sim-east-1b", "sim-east-1c"}, types: [3]string{"s1.medium", "s1.large", "s1.xlarge"},
			spec: testenv.SimProviderSpec, region: "sim-east-1",
			unconvertible: testenv.SimProviderSpec("sim-west-1", "sim-west-1a", "s1.large"), unconvertibleField: "spec.providerSpec.value.region",
			infraController: true,
		},
		{
			provider: provider.AWS(), prefix: "aws-", uidTag: awsactuator.TagMachineUID,
			zones: [3]string{"us-east-1a", "us-east-1b", "us-east-1c"}, types: [3]string{"m6i.large", "m6i.xlarge", "m6i.2xlarge"},
			spec: testenv.AWSProviderSpec, region: "us-east-1",
			unconvertible: testenv.AWSProviderSpecAMIByFilters(), unconvertibleField: "spec.providerSpec.value.ami.filters",
		},
	}
}

// machine is a Machine API Machine of the platform in zone with instance type.
func (p platform) machine(name string, authority machinev1beta1.MachineAuthority, zone, instanceType string) *machinev1beta1.Machine {
	m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mapiNS,
		Labels: map[string]string{"machine.openshift.io/cluster-api-cluster": cluster}},
		Spec: machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: p.spec(p.region, zone, instanceType)}}}
	m.Spec.AuthoritativeAPI = authority
	return m
}

// mapiMachine is a Machine API Machine of the platform in its second zone, large instances.
func (p platform) mapiMachine(name string, authority machinev1beta1.MachineAuthority) *machinev1beta1.Machine {
	return p.machine(name, authority, p.zones[1], p.types[1])
}

// machineSet is a Machine API MachineSet of the platform in its first zone, large instances.
func (p platform) machineSet(name string, replicas int32) *machinev1beta1.MachineSet {
	labels := map[string]string{"machine.openshift.io/cluster-api-cluster": cluster, "machine.openshift.io/cluster-api-machineset": name}
	return &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mapiNS,
		Labels: map[string]string{"machine.openshift.io/cluster-api-cluster": cluster}},
		Spec: machinev1beta1.MachineSetSpec{Replicas: ptr.To(replicas), Selector: metav1.LabelSelector{MatchLabels: labels},
			Template: machinev1beta1.MachineTemplateSpec{ObjectMeta: machinev1beta1.ObjectMeta{Labels: labels},
				Spec: machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: p.spec(p.region, p.zones[0], p.types[1])}}}}}
}

// specFields reads a providerSpec value's instance type and zone, on either platform.
func specFields(raw *runtime.RawExtension) (instanceType, zone string) {
	var v struct {
		InstanceType string `json:"instanceType"`
		Zone         string `json:"zone"`
		Placement    struct {
			AvailabilityZone string `json:"availabilityZone"`
		} `json:"placement"`
	}
	if raw != nil {
		_ = json.Unmarshal(raw.Raw, &v)
	}
	if v.Zone == "" {
		v.Zone = v.Placement.AvailabilityZone
	}
	return v.InstanceType, v.Zone
}

// withSpecInstanceType returns raw with its instanceType replaced (both platforms name it so).
func withSpecInstanceType(raw *runtime.RawExtension, instanceType string) *runtime.RawExtension {
	var v map[string]any
	_ = json.Unmarshal(raw.Raw, &v)
	v["instanceType"] = instanceType
	out, _ := json.Marshal(v)
	return &runtime.RawExtension{Raw: out}
}

// infraMachine reads the platform's InfraMachine name.
func (p platform) infraMachine(ctx context.Context, e *testenv.Env, name string) (*unstructured.Unstructured, error) {
	u := p.emptyInfraMachine()
	return u, e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: name}, u)
}

// emptyInfraMachine is an empty object of the platform's InfraMachine kind, to read into.
func (p platform) emptyInfraMachine() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(p.provider.InfraMachine)
	return u
}

// infraTemplate reads the platform's InfraMachineTemplate name.
func (p platform) infraTemplate(ctx context.Context, e *testenv.Env, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(p.provider.InfraMachineTemplate)
	return u, e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: name}, u)
}

// instanceTypeOf reads spec.instanceType of an InfraMachine, or with template set
// spec.template.spec.instanceType of an InfraMachineTemplate (SimMachine and AWSMachine alike).
func instanceTypeOf(u *unstructured.Unstructured, template bool) string {
	path := []string{"spec", "instanceType"}
	if template {
		path = []string{"spec", "template", "spec", "instanceType"}
	}
	s, _, _ := unstructured.NestedString(u.Object, path...)
	return s
}

// handMadeCAPIMachine creates, as a user would by hand, a Cluster API Machine and its
// InfraMachine of the platform, xlarge in the third zone (paused when asked, owned by owner
// when given): the Cluster API form of such a Machine API Machine, written through the
// conversion library so it is what the platform's provider expects.
func (p platform) handMadeCAPIMachine(t *testing.T, e *testenv.Env, name string, paused bool, owner *clusterv1.MachineSet) {
	t.Helper()
	out, _, errs := convert.ToClusterAPIMachine(p.machine(name, "", p.zones[2], p.types[2]), p.convertContext(t, e))
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	capi := out.Machine
	capi.Labels = map[string]string{clusterv1.ClusterNameLabel: cluster}
	if owner != nil {
		capi.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, clusterv1.GroupVersion.WithKind("MachineSet"))}
		for k, v := range owner.Spec.Template.Labels {
			capi.Labels[k] = v
		}
	}
	for _, o := range []client.Object{out.InfraMachine, capi} {
		if paused {
			setAnnotation(o, clusterv1.PausedAnnotation, "")
		}
		if err := e.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// waitInfraSeen waits for the provider's first pass over the InfraMachine name (its Paused
// condition), when a provider runs, for a caller that compares its resourceVersion later:
// that write is the provider's, not the sync's.
func (p platform) waitInfraSeen(t *testing.T, e *testenv.Env, name string) {
	t.Helper()
	if !p.infraController {
		return
	}
	e.Eventually(30*time.Second, "the provider's first pass over "+name, func(ctx context.Context) (bool, string, error) {
		u, err := p.infraMachine(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == clusterv1.PausedCondition {
				return true, "", nil
			}
		}
		return false, fmt.Sprint(conds), nil
	})
}

// handMadeCAPIMachineSet creates, as a user would by hand, a Cluster API MachineSet of no
// replicas and its InfraMachineTemplate (xlarge in the third zone; paused when asked): the Cluster API form of
// p.machineSet(name, 0), so it selects the same Machines as that Machine API MachineSet
// (a selector is immutable on both APIs).
func (p platform) handMadeCAPIMachineSet(t *testing.T, e *testenv.Env, name string, paused bool) *clusterv1.MachineSet {
	t.Helper()
	ms := p.machineSet(name, 0)
	ms.Spec.Template.Spec.ProviderSpec.Value = p.spec(p.region, p.zones[2], p.types[2])
	out, _, errs := convert.ToClusterAPIMachineSet(ms, p.convertContext(t, e))
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	cms := out.MachineSet
	cms.Labels = map[string]string{clusterv1.ClusterNameLabel: cluster}
	for _, o := range []client.Object{out.InfraMachineTemplate, cms} {
		if paused {
			setAnnotation(o, clusterv1.PausedAnnotation, "")
		}
		if err := e.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	return cms
}

func (p platform) convertContext(t *testing.T, e *testenv.Env) convert.Context {
	t.Helper()
	cc, err := provider.Context(context.Background(), e.Client, p.provider, convert.Namespaces{MachineAPI: mapiNS, ClusterAPI: capiNS})
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

func setAnnotation(o client.Object, key, value string) {
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[key] = value
	o.SetAnnotations(a)
}

// eachPlatform runs f as one subtest per platform.
func eachPlatform(t *testing.T, f func(t *testing.T, p platform)) {
	for _, p := range platforms() {
		t.Run(p.provider.Name, func(t *testing.T) { f(t, p) })
	}
}
