package awsactuator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/ec2"
	"github.com/machina-dev/machina/internal/controllers/aws/awsactuator"
	"github.com/machina-dev/machina/internal/demo"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/testenv"
)

// dedicatedHost is the dedicated host the test catalogue adds to the EC2 front's network.
const dedicatedHost = "h-0a1b2c3d4e5f60718"

// fixture is one lab with the EC2 front, the demo AWS cluster seeded, and SDK clients
// signed with the lab key pair.
type fixture struct {
	env     *testenv.Env
	cluster demo.AWSCluster
	ec2     *awsec2.Client
	elb     *elb.Client
	elbv2   *elbv2.Client
}

// start brings up the lab: Machine API controllers (MachineSet, NodeLink) and the "aws"
// group, the cloud's EC2 front with one dedicated host in us-east-1a, and the demo AWS
// cluster without workers.
func start(t *testing.T) *fixture {
	t.Helper()
	env := testenv.Start(t, testenv.Options{Groups: "machineapi,aws", EC2: true, CatalogueFile: hostCatalogue(t)})
	kc, err := os.ReadFile(env.Lab.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	mapiNS, capiNS := manager.Env{}.Namespaces()
	cl := demo.DefaultAWSCluster(mapiNS, capiNS, kc)
	if err := demo.EnsureAWSCluster(context.Background(), env.Client, cl, 0); err != nil {
		t.Fatal(err)
	}
	cfg := aws.Config{Region: env.Server.EC2().Region(),
		Credentials: credentials.NewStaticCredentialsProvider(ec2.LabAccessKeyID, ec2.LabSecretAccessKey, "")}
	return &fixture{env: env, cluster: cl,
		ec2:   awsec2.NewFromConfig(cfg, func(o *awsec2.Options) { o.BaseEndpoint = aws.String(env.EC2URL) }),
		elb:   elb.NewFromConfig(cfg, func(o *elb.Options) { o.BaseEndpoint = aws.String(env.EC2URL + ec2.PathELB) }),
		elbv2: elbv2.NewFromConfig(cfg, func(o *elbv2.Options) { o.BaseEndpoint = aws.String(env.EC2URL + ec2.PathELBv2) }),
	}
}

// hostCatalogue writes a catalogue whose aws section is the default plus dedicatedHost.
func hostCatalogue(t *testing.T) string {
	t.Helper()
	def := api.DefaultAWSCatalogue()
	network := *def.AWS
	network.Hosts = append(slices.Clone(network.Hosts), api.AWSDedicatedHost{ID: dedicatedHost, Zone: "us-east-1a", InstanceType: "m6i.xlarge"})
	b, err := yaml.Marshal(api.Catalogue{AWS: &network})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "catalogue.yaml")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// workerSpec is the providerSpec of the demo cluster's worker MachineSet in us-east-1a.
func (f *fixture) workerSpec(t testing.TB) *machinev1beta1.AWSMachineProviderConfig {
	t.Helper()
	ms := f.cluster.MachineSet("template", "us-east-1a", 0)
	ps := &machinev1beta1.AWSMachineProviderConfig{}
	if err := json.Unmarshal(ms.Spec.Template.Spec.ProviderSpec.Value.Raw, ps); err != nil {
		t.Fatal(err)
	}
	return ps
}

// machine creates a Machine of the demo cluster named name with the worker providerSpec
// changed by edit, and returns it.
func (f *fixture) machine(t testing.TB, name string, labels map[string]string, edit func(*machinev1beta1.AWSMachineProviderConfig)) *machinev1beta1.Machine {
	t.Helper()
	m, err := f.create(f.env.Client, name, labels, edit, t)
	if err != nil {
		t.Fatalf("creating Machine %s: %v", name, err)
	}
	return m
}

// create creates the Machine with client c.
func (f *fixture) create(c client.Client, name string, labels map[string]string, edit func(*machinev1beta1.AWSMachineProviderConfig),
	t testing.TB) (*machinev1beta1.Machine, error) {
	t.Helper()
	ps := f.workerSpec(t)
	if edit != nil {
		edit(ps)
	}
	raw, err := json.Marshal(ps)
	if err != nil {
		t.Fatal(err)
	}
	l := map[string]string{awsactuator.ClusterNameLabel: f.cluster.Name}
	for k, v := range labels {
		l[k] = v
	}
	m := &machinev1beta1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.cluster.MachineAPINamespace, Labels: l},
		Spec:       machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: raw}}},
	}
	return m, c.Create(context.Background(), m)
}

// get reads the Machine again.
func (f *fixture) get(ctx context.Context, m *machinev1beta1.Machine) (*machinev1beta1.Machine, error) {
	out := &machinev1beta1.Machine{}
	return out, f.env.Client.Get(ctx, client.ObjectKeyFromObject(m), out)
}

// waitMachine waits until cond holds for the Machine and returns it.
func (f *fixture) waitMachine(t testing.TB, m *machinev1beta1.Machine, timeout time.Duration, what string,
	cond func(*machinev1beta1.Machine) bool) *machinev1beta1.Machine {
	t.Helper()
	var last *machinev1beta1.Machine
	f.env.For(t).Eventually(timeout, m.Name+": "+what, func(ctx context.Context) (bool, string, error) {
		cur, err := f.get(ctx, m)
		if err != nil {
			return false, err.Error(), nil
		}
		last = cur
		return cond(cur), describe(cur), nil
	})
	return last
}

// running waits for phase Running with a Node and returns the Machine and its instance.
func (f *fixture) running(t testing.TB, m *machinev1beta1.Machine) (*machinev1beta1.Machine, ec2types.Instance) {
	t.Helper()
	m = f.waitMachine(t, m, 3*time.Minute, "Running with a Node", func(m *machinev1beta1.Machine) bool {
		return ptr.Deref(m.Status.Phase, "") == machinev1beta1.PhaseRunning && m.Status.NodeRef != nil
	})
	return m, f.instance(t, instanceID(t, m))
}

// failed waits for phase Failed and checks the error message names every part.
func (f *fixture) failed(t testing.TB, m *machinev1beta1.Machine, parts ...string) *machinev1beta1.Machine {
	t.Helper()
	m = f.waitMachine(t, m, 2*time.Minute, "Failed", func(m *machinev1beta1.Machine) bool {
		return ptr.Deref(m.Status.Phase, "") == machinev1beta1.PhaseFailed
	})
	for _, p := range parts {
		if !strings.Contains(ptr.Deref(m.Status.ErrorMessage, ""), p) {
			t.Errorf("errorMessage %q does not name %q", ptr.Deref(m.Status.ErrorMessage, ""), p)
		}
	}
	return m
}

// creationCondition waits for the Machine's MachineCreation condition to have reason.
func (f *fixture) creationCondition(t testing.TB, m *machinev1beta1.Machine, reason string) *machinev1beta1.Condition {
	t.Helper()
	var found *machinev1beta1.Condition
	f.waitMachine(t, m, 2*time.Minute, "MachineCreation reason "+reason, func(m *machinev1beta1.Machine) bool {
		for i, c := range m.Status.Conditions {
			if c.Type == machinev1beta1.MachineCreation && c.Reason == reason {
				found = &m.Status.Conditions[i]
				return true
			}
		}
		return false
	})
	return found
}

// deleted deletes the Machine and waits until it is gone.
func (f *fixture) deleted(t testing.TB, m *machinev1beta1.Machine) {
	t.Helper()
	err := f.env.Client.Delete(context.Background(), m)
	if client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	f.env.For(t).Eventually(3*time.Minute, m.Name+" deleted", func(ctx context.Context) (bool, string, error) {
		cur, err := f.get(ctx, m)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, err.Error(), nil
		}
		return false, describe(cur), nil
	})
}

// instances lists the cloud's instances (any state) launched for the Machine.
func (f *fixture) instances(t testing.TB, m *machinev1beta1.Machine) []api.Instance {
	t.Helper()
	return f.env.For(t).InstancesTagged(awsactuator.TagMachineUID, string(m.UID))
}

// instance describes one instance through the EC2 front.
func (f *fixture) instance(t testing.TB, id string) ec2types.Instance {
	t.Helper()
	out, err := f.ec2.DescribeInstances(context.Background(), &awsec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil || len(out.Reservations) != 1 || len(out.Reservations[0].Instances) != 1 {
		t.Fatalf("DescribeInstances %s: %v, %+v", id, err, out)
	}
	return out.Reservations[0].Instances[0]
}

// volumes describes the instance's volumes by device name.
func (f *fixture) volumes(t testing.TB, id string) map[string]ec2types.Volume {
	t.Helper()
	out, err := f.ec2.DescribeVolumes(context.Background(), &awsec2.DescribeVolumesInput{
		Filters: []ec2types.Filter{{Name: aws.String("attachment.instance-id"), Values: []string{id}}}})
	if err != nil {
		t.Fatal(err)
	}
	byDevice := map[string]ec2types.Volume{}
	for _, v := range out.Volumes {
		for _, a := range v.Attachments {
			byDevice[aws.ToString(a.Device)] = v
		}
	}
	return byDevice
}

// idByName returns the ID of the subnet or security group whose Name tag is name.
func (f *fixture) idByName(t testing.TB, kind, name string) string {
	t.Helper()
	flt := []ec2types.Filter{{Name: aws.String("tag:Name"), Values: []string{name}}}
	ctx := context.Background()
	switch kind {
	case "subnet":
		out, err := f.ec2.DescribeSubnets(ctx, &awsec2.DescribeSubnetsInput{Filters: flt})
		if err != nil || len(out.Subnets) != 1 {
			t.Fatalf("subnet %s: %v, %d found", name, err, len(out.Subnets))
		}
		return aws.ToString(out.Subnets[0].SubnetId)
	default:
		out, err := f.ec2.DescribeSecurityGroups(ctx, &awsec2.DescribeSecurityGroupsInput{Filters: flt})
		if err != nil || len(out.SecurityGroups) != 1 {
			t.Fatalf("security group %s: %v, %d found", name, err, len(out.SecurityGroups))
		}
		return aws.ToString(out.SecurityGroups[0].GroupId)
	}
}

// events returns the reasons of the events recorded about the Machine.
func (f *fixture) events(t testing.TB, m *machinev1beta1.Machine) []string {
	t.Helper()
	var l eventsv1.EventList
	if err := f.env.Client.List(context.Background(), &l, client.InNamespace(m.Namespace)); err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range l.Items {
		if e.Regarding.Name == m.Name && e.Regarding.Kind == "Machine" {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}

// fault injects a cloud fault and returns a function that removes it.
func (f *fixture) fault(t testing.TB, spec string) func() {
	t.Helper()
	ft, err := api.ParseFaultSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	created, err := f.env.Cloud.CreateFault(context.Background(), ft)
	if err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := f.env.Cloud.DeleteFaults(context.Background(), created.FaultID); err != nil {
			t.Error(err)
		}
	}
}

// instanceID reads the instance ID of the Machine's provider ID.
func instanceID(t testing.TB, m *machinev1beta1.Machine) string {
	t.Helper()
	pid := ptr.Deref(m.Spec.ProviderID, "")
	i := strings.LastIndex(pid, "/")
	if !strings.HasPrefix(pid, awsactuator.ProviderIDPrefix) || i < 0 {
		t.Fatalf("Machine %s: provider ID %q is not aws:///<zone>/<id>", m.Name, pid)
	}
	return pid[i+1:]
}

// describe summarises a Machine for failure messages.
func describe(m *machinev1beta1.Machine) string {
	var conds []string
	for _, c := range m.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return fmt.Sprintf("phase %q providerID %q error %q conditions %v", ptr.Deref(m.Status.Phase, ""), ptr.Deref(m.Spec.ProviderID, ""),
		ptr.Deref(m.Status.ErrorMessage, ""), conds)
}

// holdProviderID makes the kube-apiserver refuse every write that would record an
// instance on the Machine named name (spec.providerID, status.providerStatus), as a crash
// right after RunInstances would lose them. It returns once the hold is enforced, and a
// function that lifts it.
func (f *fixture) holdProviderID(t testing.TB, name string) func() {
	t.Helper()
	ctx := context.Background()
	id, canary := "test-hold-"+name, "test-hold-"+name+"-canary"
	fail := admissionregistrationv1.Fail
	rule := func(op admissionregistrationv1.OperationType, group string, resources ...string) admissionregistrationv1.NamedRuleWithOperations {
		return admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{op},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: resources}}}
	}
	deny := fmt.Sprintf("object.metadata.name == %q && (has(object.spec.providerID) || (has(object.status) && has(object.status.providerStatus)))", name)
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: id},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{
				rule("CREATE", "", "configmaps"), rule("UPDATE", machinev1beta1.GroupName, "machines", "machines/status")}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("request.resource.resource == 'configmaps' ? object.metadata.name != %q : !(%s)", canary, deny),
				Message:    "held by the test"}}}}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: id},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: id,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}
	for _, o := range []client.Object{policy, binding} {
		if err := f.env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	enforced := func(ctx context.Context) bool {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: canary, Namespace: "default"}}
		err := f.env.Client.Create(ctx, cm, client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "held by the test")
	}
	f.env.For(t).Eventually(30*time.Second, "hold in force", func(ctx context.Context) (bool, string, error) {
		return enforced(ctx), "canary admitted", nil
	})
	return func() {
		for _, o := range []client.Object{binding, policy} {
			if err := f.env.Client.Delete(ctx, o); err != nil {
				t.Error(err)
			}
		}
		f.env.For(t).Eventually(30*time.Second, "hold lifted", func(ctx context.Context) (bool, string, error) {
			return !enforced(ctx), "canary refused", nil
		})
	}
}
