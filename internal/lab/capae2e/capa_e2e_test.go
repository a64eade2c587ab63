package capae2e_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	capav1 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/ec2"
	"github.com/machina-dev/machina/internal/convert"
	awsconvert "github.com/machina-dev/machina/internal/convert/providers/aws"
	"github.com/machina-dev/machina/internal/demo"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/testenv"
	"github.com/machina-dev/machina/internal/userdata"
)

// capaFieldManager is the field manager of CAPA's writes: its client's user agent.
const capaFieldManager = "cluster-api-provider-aws-controller"

// TestCAPAProvisionsThroughEC2Front runs machina's Cluster API controllers with the
// upstream CAPA controller against the simulated cloud's EC2 front, with the Cluster and an
// externally managed AWSCluster as OpenShift has them: a Cluster API MachineSet whose
// template is the lab's worker providerSpec converted to an AWSMachineTemplate scales to
// one; CAPA launches the instance through the EC2 front (the template's AMI, instance type
// and zone, the bootstrap Secret's Ignition as user data), it becomes a Node, the Machine
// runs with providerID aws:///<zone>/<instance>, the AWSMachine's status is CAPA's; deleting
// the Machine makes CAPA terminate exactly its instance (the MachineSet's replacement is
// left alone); CAPA asked the front for nothing it does not serve.
func TestCAPAProvisionsThroughEC2Front(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Groups: "clusterapi", EC2: true})
	front := e.Server.EC2()
	ctx := context.Background()
	mapiNS, capiNS := manager.Env{}.Namespaces()
	e.StartCAPA(capiNS)

	kc, err := os.ReadFile(e.Lab.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	cl := demo.DefaultAWSCluster(mapiNS, capiNS, kc)
	if err := demo.EnsureAWSCluster(ctx, e.Client, cl, 0); err != nil {
		t.Fatal(err)
	}
	ms := createMachineSet(t, e, cl, "capa-workers", cl.Zones[0])

	first := waitRunning(t, e, ms, "")
	instances := describe(t, e, first.instanceID)
	if len(instances) != 1 || instances[0].State.Name != types.InstanceStateNameRunning {
		t.Fatalf("EC2 front shows %+v for %s, want one running instance", instances, first.instanceID)
	}
	if got := string(instances[0].InstanceType); got != cl.InstanceType {
		t.Errorf("instance type %s, want %s", got, cl.InstanceType)
	}
	if got := aws.ToString(instances[0].Placement.AvailabilityZone); got != cl.Zones[0] {
		t.Errorf("instance in zone %s, want %s", got, cl.Zones[0])
	}
	if got := aws.ToString(instances[0].ImageId); got != cl.AMI {
		t.Errorf("instance image %s, want %s", got, cl.AMI)
	}
	checkUserData(t, e, first.instanceID, cl.ClusterAPINamespace)

	// Deleting the Machine terminates its instance and only it.
	if err := e.Client.Delete(ctx, first.machine); err != nil {
		t.Fatal(err)
	}
	e.Eventually(3*time.Minute, "the deleted Machine's instance is terminated and the Machine gone", func(ctx context.Context) (bool, string, error) {
		got := describe(t, e, first.instanceID)
		state := "missing"
		if len(got) == 1 {
			state = string(got[0].State.Name)
		}
		err := e.Client.Get(ctx, client.ObjectKeyFromObject(first.machine), &clusterv1.Machine{})
		return state == string(types.InstanceStateNameTerminated) && client.IgnoreNotFound(err) == nil && err != nil,
			fmt.Sprintf("instance %s %s, Machine get: %v", first.instanceID, state, err), nil
	})
	second := waitRunning(t, e, ms, first.instanceID)
	if got := describe(t, e, second.instanceID); len(got) != 1 || got[0].State.Name != types.InstanceStateNameRunning {
		t.Errorf("the replacement's instance %s is not running after the first was terminated: %+v", second.instanceID, got)
	}
	owned := describeTagged(t, e, "sigs.k8s.io/cluster-api-provider-aws/cluster/"+cl.Name)
	if len(owned) != 2 {
		t.Errorf("CAPA launched %d instances for the cluster, want 2 (the first and its replacement): %v", len(owned), owned)
	}
	// Everything CAPA asked of the front is something the front serves.
	calls := front.Calls()
	t.Logf("EC2 front calls: %v", calls)
	for action := range calls {
		if action == ec2.RejectedCall || !ec2.IsAction(action) {
			t.Errorf("CAPA made %d calls the EC2 front does not serve: %s", calls[action], action)
		}
	}
}

// createMachineSet creates the worker user data Secret OpenShift gives the Cluster API
// namespace (format ignition), an AWSMachineTemplate converted from the lab's Machine API
// worker providerSpec in zone, and a Cluster API MachineSet of one replica over it.
func createMachineSet(t *testing.T, e *testenv.Env, cl demo.AWSCluster, name, zone string) *clusterv1.MachineSet {
	t.Helper()
	ctx := context.Background()
	mapiMS := cl.MachineSet(name, zone, 1)
	// The worker user data Secret OpenShift gives the Cluster API namespace, as the sync
	// writes it (format ignition).
	if err := userdata.Ensure(ctx, e.Client, cl.MachineAPINamespace, cl.ClusterAPINamespace, ptr.To(demo.UserDataSecret), cl.Name); err != nil {
		t.Fatal(err)
	}

	p, err := awsconvert.FromInfrastructure(cl.Infrastructure())
	if err != nil {
		t.Fatal(err)
	}
	report := &convert.Report{}
	spec, _ := p.ToInfra(mapiMS.Spec.Template.Spec.ProviderSpec.Value, field.NewPath("spec", "template", "spec", "providerSpec", "value"), report)
	if report.HasErrors() {
		t.Fatalf("converting the lab's worker providerSpec: %v", report.Errors)
	}
	tmpl := p.NewInfraMachineTemplate(spec)
	tmpl.SetName(name)
	tmpl.SetNamespace(cl.ClusterAPINamespace)

	labels := map[string]string{clusterv1.ClusterNameLabel: cl.Name, "machina.dev/e2e": name}
	ms := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cl.ClusterAPINamespace},
		Spec: clusterv1.MachineSetSpec{
			ClusterName: cl.Name,
			Replicas:    ptr.To[int32](1),
			Selector:    metav1.LabelSelector{MatchLabels: labels},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: labels},
				Spec: clusterv1.MachineSpec{
					ClusterName:   cl.Name,
					Bootstrap:     clusterv1.Bootstrap{DataSecretName: ptr.To(demo.UserDataSecret)},
					FailureDomain: zone,
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: capav1.GroupVersion.Group, Kind: "AWSMachineTemplate", Name: name},
				},
			},
		}}
	for _, o := range []client.Object{tmpl, ms} {
		if err := e.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	return ms
}

// checkUserData: the instance boots with the bootstrap Secret's Ignition unchanged, as EC2
// user data (ignition.storageType UnencryptedUserData: no S3, Secrets Manager or SSM).
func checkUserData(t *testing.T, e *testenv.Env, id, namespace string) {
	t.Helper()
	ctx := context.Background()
	secret := &corev1.Secret{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: demo.UserDataSecret}, secret); err != nil {
		t.Fatal(err)
	}
	got, err := e.Cloud.DescribeInstances(ctx, api.DescribeInstancesRequest{InstanceIDs: []string{id}, IncludeUserData: true})
	if err != nil || len(got) != 1 {
		t.Fatalf("the cloud's instance %s: %+v, %v", id, got, err)
	}
	if want := secret.Data["value"]; len(want) == 0 || !bytes.Equal(got[0].UserData, want) {
		t.Errorf("instance %s has user data %q, want the bootstrap Secret's %q", id, got[0].UserData, want)
	}
}

// provisioned is a Running Machine of the MachineSet and its instance.
type provisioned struct {
	machine    *clusterv1.Machine
	instanceID string
}

// waitRunning waits for a Machine of ms whose instance is not skipID to be Running with a
// Node, CAPA's providerID, and an AWSMachine whose status CAPA wrote.
func waitRunning(t *testing.T, e *testenv.Env, ms *clusterv1.MachineSet, skipID string) provisioned {
	t.Helper()
	var out provisioned
	e.Eventually(5*time.Minute, "a Machine of "+ms.Name+" runs on an instance CAPA launched", func(ctx context.Context) (bool, string, error) {
		machines := &clusterv1.MachineList{}
		if err := e.Client.List(ctx, machines, client.InNamespace(ms.Namespace), client.MatchingLabels(ms.Spec.Selector.MatchLabels)); err != nil {
			return false, "", err
		}
		var seen []string
		for i := range machines.Items {
			m := &machines.Items[i]
			ok, desc, err := machineRunning(ctx, e, m, skipID)
			if err != nil || ok {
				out = provisioned{machine: m, instanceID: instanceID(m.Spec.ProviderID)}
				return ok, desc, err
			}
			seen = append(seen, desc)
		}
		return false, strings.Join(seen, "; "), nil
	})
	return out
}

// machineRunning checks one Machine and its AWSMachine and Node.
func machineRunning(ctx context.Context, e *testenv.Env, m *clusterv1.Machine, skipID string) (bool, string, error) {
	desc := fmt.Sprintf("Machine %s phase %s providerID %q", m.Name, m.Status.Phase, m.Spec.ProviderID)
	id := instanceID(m.Spec.ProviderID)
	if id == "" || id == skipID || m.DeletionTimestamp != nil {
		return false, desc, nil
	}
	if want := "aws:///" + m.Spec.FailureDomain + "/" + id; m.Spec.ProviderID != want {
		return false, desc, fmt.Errorf("%s: providerID %q, want %q (aws:///<zone>/<instance>)", m.Name, m.Spec.ProviderID, want)
	}
	am := &capav1.AWSMachine{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.InfrastructureRef.Name}, am); err != nil {
		return false, desc, client.IgnoreNotFound(err)
	}
	desc += fmt.Sprintf(", AWSMachine ready %v state %v", am.Status.Ready, ptr.Deref(am.Status.InstanceState, ""))
	if !am.Status.Ready || ptr.Deref(am.Status.InstanceState, "") != capav1.InstanceStateRunning || !writtenBy(am, capaFieldManager) {
		return false, desc, nil
	}
	if m.Status.Phase != string(clusterv1.MachinePhaseRunning) || !m.Status.NodeRef.IsDefined() {
		return false, desc, nil
	}
	node := &corev1.Node{}
	if err := e.Client.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, node); err != nil {
		return false, desc, client.IgnoreNotFound(err)
	}
	if node.Spec.ProviderID != m.Spec.ProviderID {
		return false, desc, fmt.Errorf("Node %s has providerID %q, its Machine %q", node.Name, node.Spec.ProviderID, m.Spec.ProviderID)
	}
	return true, desc, nil
}

// writtenBy reports whether manager owns fields of obj's status.
func writtenBy(obj client.Object, manager string) bool {
	for _, f := range obj.GetManagedFields() {
		if f.Manager == manager && f.Subresource == "status" {
			return true
		}
	}
	return false
}

func instanceID(providerID string) string {
	if !strings.HasPrefix(providerID, "aws:///") {
		return ""
	}
	return providerID[strings.LastIndex(providerID, "/")+1:]
}

// ec2Client is a real aws-sdk-go-v2 client of the EC2 front.
func ec2Client(e *testenv.Env) *awsec2.Client {
	return awsec2.New(awsec2.Options{Region: e.Server.EC2().Region(), BaseEndpoint: aws.String(e.EC2URL),
		Credentials: credentials.NewStaticCredentialsProvider(ec2.LabAccessKeyID, ec2.LabSecretAccessKey, "")})
}

func describe(t *testing.T, e *testenv.Env, id string) []types.Instance {
	t.Helper()
	out, err := ec2Client(e).DescribeInstances(context.Background(), &awsec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatalf("DescribeInstances %s: %v", id, err)
	}
	var all []types.Instance
	for _, r := range out.Reservations {
		all = append(all, r.Instances...)
	}
	return all
}

// describeTagged returns the IDs of the instances carrying tag key.
func describeTagged(t *testing.T, e *testenv.Env, key string) []string {
	t.Helper()
	out, err := ec2Client(e).DescribeInstances(context.Background(), &awsec2.DescribeInstancesInput{
		Filters: []types.Filter{{Name: aws.String("tag-key"), Values: []string{key}}}})
	if err != nil {
		t.Fatalf("DescribeInstances tag-key %s: %v", key, err)
	}
	var ids []string
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			ids = append(ids, aws.ToString(i.InstanceId))
		}
	}
	return ids
}
