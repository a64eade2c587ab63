package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	capav1 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/ec2"
)

// AWSCluster describes the lab's OpenShift-style cluster on the simulated cloud's EC2 front
// (`machina up --platform aws`). DefaultAWSCluster matches the EC2 front's built-in
// catalogue: its subnets and security groups carry the Name tags an OpenShift installer
// gives them, derived from Name.
type AWSCluster struct {
	Name                string   // infrastructure name: Infrastructure status, Cluster API Cluster, tag prefix
	Region              string   // Infrastructure status.platformStatus.aws.region
	Zones               []string // one worker MachineSet per zone
	AMI                 string   // the RHCOS AMI the workers boot
	InstanceType        string
	MachineAPINamespace string
	ClusterAPINamespace string
	Kubeconfig          []byte // what <name>-kubeconfig carries
	// AccessKeyID and SecretAccessKey go into the Machine API credentials Secret.
	AccessKeyID, SecretAccessKey string
}

// AWSCredentialsSecret is the Machine API credentials Secret of an OpenShift cluster on AWS.
const AWSCredentialsSecret = "aws-cloud-credentials" //nolint:gosec // a Secret's name, not a credential

// DefaultAWSCluster is the cluster the EC2 front's built-in catalogue describes, in the given
// namespaces, signed with the lab's documented key pair.
func DefaultAWSCluster(machineAPINamespace, clusterAPINamespace string, kubeconfig []byte) AWSCluster {
	return AWSCluster{Name: api.DefaultAWSInfraID, Region: api.DefaultAWSRegion, Zones: []string{"us-east-1a", "us-east-1b"},
		AMI: "ami-0a8f3c6e2b1d94f57", InstanceType: "m6i.xlarge",
		MachineAPINamespace: machineAPINamespace, ClusterAPINamespace: clusterAPINamespace, Kubeconfig: kubeconfig,
		AccessKeyID: ec2.LabAccessKeyID, SecretAccessKey: ec2.LabSecretAccessKey}
}

// MachineSetNames are the worker MachineSets' names, installer-style: <name>-worker-<zone>.
func (cl AWSCluster) MachineSetNames() []string {
	out := make([]string, len(cl.Zones))
	for i, z := range cl.Zones {
		out[i] = cl.Name + "-worker-" + z
	}
	return out
}

// Infrastructure is the cluster's config.openshift.io Infrastructure "cluster", status
// included (the caller writes the status through its subresource).
func (cl AWSCluster) Infrastructure() *configv1.Infrastructure {
	return &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
		Spec: configv1.InfrastructureSpec{PlatformSpec: configv1.PlatformSpec{Type: configv1.AWSPlatformType, AWS: &configv1.AWSPlatformSpec{}}},
		Status: configv1.InfrastructureStatus{
			InfrastructureName:     cl.Name,
			PlatformStatus:         &configv1.PlatformStatus{Type: configv1.AWSPlatformType, AWS: &configv1.AWSPlatformStatus{Region: cl.Region}},
			ControlPlaneTopology:   configv1.HighlyAvailableTopologyMode,
			InfrastructureTopology: configv1.HighlyAvailableTopologyMode,
		}}
}

// ClusterObjects are the namespaced objects of the cluster besides its workload: the Machine
// API worker user data and credentials Secrets, and the Cluster API Cluster with its
// externally managed AWSCluster (as OpenShift runs CAPA) and kubeconfig Secret.
func (cl AWSCluster) ClusterObjects() []client.Object {
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cl.MachineAPINamespace}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cl.ClusterAPINamespace}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: UserDataSecret, Namespace: cl.MachineAPINamespace},
			Data: map[string][]byte{"userData": cl.ignitionStub(), "disableTemplating": []byte("true")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: AWSCredentialsSecret, Namespace: cl.MachineAPINamespace},
			Data: map[string][]byte{"aws_access_key_id": []byte(cl.AccessKeyID), "aws_secret_access_key": []byte(cl.SecretAccessKey)}},
		&capav1.AWSCluster{ObjectMeta: metav1.ObjectMeta{Name: cl.Name, Namespace: cl.ClusterAPINamespace,
			Annotations: map[string]string{clusterv1.ManagedByAnnotation: "machina"}},
			Spec: capav1.AWSClusterSpec{Region: cl.Region}},
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: cl.Name, Namespace: cl.ClusterAPINamespace},
			Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: capav1.GroupVersion.Group, Kind: "AWSCluster", Name: cl.Name}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: cl.Name + "-kubeconfig", Namespace: cl.ClusterAPINamespace,
			Labels: map[string]string{clusterv1.ClusterNameLabel: cl.Name}},
			Data: map[string][]byte{"value": cl.Kubeconfig}},
	}
}

// ignitionStub is the worker user data an OpenShift installation stores: an Ignition config
// that merges the worker config from the machine config server.
func (cl AWSCluster) ignitionStub() []byte {
	b, _ := json.Marshal(map[string]any{"ignition": map[string]any{"version": "3.2.0",
		"config": map[string]any{"merge": []any{map[string]any{"source": "https://api-int." + cl.Name + ".machina.lab:22623/config/worker"}}}}})
	return b
}

// WorkloadObjects are the worker MachineSets (one per zone, replicas each) and a
// MachineHealthCheck over their Machines.
func (cl AWSCluster) WorkloadObjects(replicas int32) []client.Object {
	var out []client.Object
	for i, name := range cl.MachineSetNames() {
		out = append(out, cl.MachineSet(name, cl.Zones[i], replicas))
	}
	return append(out, &machinev1beta1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: cl.Name + "-workers", Namespace: cl.MachineAPINamespace},
		Spec: machinev1beta1.MachineHealthCheckSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"machine.openshift.io/cluster-api-machine-role": "worker"}},
			UnhealthyConditions: []machinev1beta1.UnhealthyCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Timeout: metav1.Duration{Duration: 30 * time.Second}},
				{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Timeout: metav1.Duration{Duration: 30 * time.Second}},
			},
			MaxUnhealthy:       ptr.To(intstr.FromString("40%")),
			NodeStartupTimeout: &metav1.Duration{Duration: 10 * time.Minute},
		}})
}

// MachineSet is a worker MachineSet in zone as an OpenShift installer writes it: the cluster's
// AMI, the zone's private subnet and the node and lb security groups found by their Name
// tags, the worker instance profile, a 120 GiB encrypted gp3 root volume, the cluster-owned tag.
func (cl AWSCluster) MachineSet(name, zone string, replicas int32) *machinev1beta1.MachineSet {
	byName := func(name string) machinev1beta1.AWSResourceReference {
		return machinev1beta1.AWSResourceReference{Filters: []machinev1beta1.Filter{{Name: "tag:Name", Values: []string{name}}}}
	}
	raw, _ := json.Marshal(&machinev1beta1.AWSMachineProviderConfig{
		TypeMeta:           metav1.TypeMeta{APIVersion: machinev1beta1.GroupVersion.String(), Kind: "AWSMachineProviderConfig"},
		AMI:                machinev1beta1.AWSResourceReference{ID: ptr.To(cl.AMI)},
		InstanceType:       cl.InstanceType,
		Tags:               []machinev1beta1.TagSpecification{{Name: "kubernetes.io/cluster/" + cl.Name, Value: "owned"}},
		IAMInstanceProfile: &machinev1beta1.AWSResourceReference{ID: ptr.To(cl.Name + "-worker-profile")},
		UserDataSecret:     &corev1.LocalObjectReference{Name: UserDataSecret},
		CredentialsSecret:  &corev1.LocalObjectReference{Name: AWSCredentialsSecret},
		SecurityGroups:     []machinev1beta1.AWSResourceReference{byName(cl.Name + "-node"), byName(cl.Name + "-lb")},
		Subnet:             byName(cl.Name + "-subnet-private-" + zone),
		Placement:          machinev1beta1.Placement{Region: cl.Region, AvailabilityZone: zone},
		BlockDevices: []machinev1beta1.BlockDeviceMappingSpec{{EBS: &machinev1beta1.EBSBlockDeviceSpec{
			Encrypted: ptr.To(true), VolumeSize: ptr.To[int64](120), VolumeType: ptr.To("gp3")}}},
	})
	return workerMachineSet(cl.Name, cl.MachineAPINamespace, name, replicas, raw)
}

// EnsureAWSCluster creates whatever of the cluster's objects is missing (workload included,
// replicas per MachineSet); existing ones are left as they are, so it is safe on every start
// of a persistent lab.
func EnsureAWSCluster(ctx context.Context, c client.Client, cl AWSCluster, replicas int32) error {
	if err := EnsureAWSClusterObjects(ctx, c, cl); err != nil {
		return err
	}
	for _, o := range cl.WorkloadObjects(replicas) {
		if err := create(ctx, c, o); err != nil {
			return err
		}
	}
	return nil
}

// EnsureAWSClusterObjects is EnsureAWSCluster without the workload: the Infrastructure and
// ClusterObjects. The Infrastructure and AWSCluster statuses are written once, as the
// installer and OpenShift's Cluster API operator write them.
func EnsureAWSClusterObjects(ctx context.Context, c client.Client, cl AWSCluster) error {
	want := cl.Infrastructure()
	infra := want.DeepCopy()
	infra.Status = configv1.InfrastructureStatus{}
	if err := create(ctx, c, infra); err != nil {
		return err
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(infra), infra); err != nil {
		return err
	}
	if infra.Status.InfrastructureName == "" {
		infra.Status = want.Status
		if err := c.Status().Update(ctx, infra); err != nil {
			return fmt.Errorf("writing the Infrastructure status: %w", err)
		}
	}
	for _, o := range cl.ClusterObjects() {
		if err := create(ctx, c, o); err != nil {
			return err
		}
	}
	ac := &capav1.AWSCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: cl.ClusterAPINamespace, Name: cl.Name}, ac); err != nil {
		return err
	}
	if !ac.Status.Ready {
		ac.Status.Ready = true
		if err := c.Status().Update(ctx, ac); err != nil {
			return fmt.Errorf("writing the AWSCluster status: %w", err)
		}
	}
	return nil
}
