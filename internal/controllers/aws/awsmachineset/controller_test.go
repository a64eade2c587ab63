package awsmachineset_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/cloudtest"
	"github.com/machina-dev/machina/internal/cloud/ec2"
	"github.com/machina-dev/machina/internal/controllers/aws/awsmachineset"
	"github.com/machina-dev/machina/internal/controllers/scalefromzero"
	"github.com/machina-dev/machina/internal/lab/labtest"
	"github.com/machina-dev/machina/internal/scheme"
)

const (
	ns          = "default"
	cpuKey      = "machine.openshift.io/vCPU"
	memoryKey   = "machine.openshift.io/memoryMb"
	gpuKey      = "machine.openshift.io/GPU"
	labelsKey   = "capacity.cluster-autoscaler.kubernetes.io/labels"
	credentials = "aws-cloud-credentials"
)

type env struct {
	t      *testing.T
	client client.Client
	cloud  *cloudtest.Cloud
}

// start runs a lab, the simulated cloud with its EC2 front, and the controller alone in a
// manager that runs as machina's ServiceAccount with the generated roles.
func start(t *testing.T) *env {
	l := labtest.Start(t)
	cloud := cloudtest.Start(t, cloudtest.WithEC2(ec2.Options{}))
	c, err := client.New(l.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := l.ManagerConfig()
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	types := awsmachineset.NewInstanceTypes(awsmachineset.Config{EC2Endpoint: cloud.Server.EC2().URL()})
	if err := (&awsmachineset.Reconciler{Client: mgr.GetClient(), Types: types, Resync: time.Hour}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("manager: %v", err)
		}
	})
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: credentials, Namespace: ns},
		Data: map[string][]byte{"aws_access_key_id": []byte(ec2.LabAccessKeyID), "aws_secret_access_key": []byte(ec2.LabSecretAccessKey)}}
	if err := c.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, client: c, cloud: cloud}
}

func machineSet(name, instanceType, credentialsSecret string) *machinev1beta1.MachineSet {
	raw, _ := json.Marshal(map[string]any{"apiVersion": "machine.openshift.io/v1beta1", "kind": "AWSMachineProviderConfig",
		"ami": map[string]any{"id": "ami-0a8f3c6e2b1d94f57"}, "instanceType": instanceType,
		"placement":         map[string]any{"region": api.DefaultAWSRegion, "availabilityZone": "us-east-1a"},
		"credentialsSecret": map[string]any{"name": credentialsSecret}})
	sel := map[string]string{"set": name}
	return &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: machinev1beta1.MachineSetSpec{Replicas: ptr.To[int32](0), Selector: metav1.LabelSelector{MatchLabels: sel},
			Template: machinev1beta1.MachineTemplateSpec{ObjectMeta: machinev1beta1.ObjectMeta{Labels: sel},
				Spec: machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: raw}}}}}}
}

func (e *env) create(ms *machinev1beta1.MachineSet) {
	e.t.Helper()
	if err := e.client.Create(context.Background(), ms); err != nil {
		e.t.Fatal(err)
	}
}

// waitFor polls the MachineSet until check passes, failing with its last answer.
func (e *env) waitFor(t *testing.T, name string, check func(ms *machinev1beta1.MachineSet) error) *machinev1beta1.MachineSet {
	t.Helper()
	ms := &machinev1beta1.MachineSet{}
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := e.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ms); err != nil {
			return false, err
		}
		last = check(ms)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("MachineSet %s: %v (last: %v)", name, err, last)
	}
	return ms
}

func condition(ms *machinev1beta1.MachineSet) *machinev1beta1.Condition {
	for i := range ms.Status.Conditions {
		if ms.Status.Conditions[i].Type == scalefromzero.CapacityAnnotatedCondition {
			return &ms.Status.Conditions[i]
		}
	}
	return nil
}

func hasCondition(status corev1.ConditionStatus, reason, msg string) func(*machinev1beta1.MachineSet) error {
	return func(ms *machinev1beta1.MachineSet) error {
		c := condition(ms)
		if c == nil || c.Status != status || c.Reason != reason || !strings.Contains(c.Message, msg) {
			return fmt.Errorf("condition %+v, want %s/%s saying %q", c, status, reason, msg)
		}
		return nil
	}
}

func annotated(want map[string]string) func(*machinev1beta1.MachineSet) error {
	return func(ms *machinev1beta1.MachineSet) error {
		for k, v := range want {
			if ms.Annotations[k] != v {
				return fmt.Errorf("annotations %v, want %s=%q", ms.Annotations, k, v)
			}
		}
		return hasCondition(corev1.ConditionTrue, scalefromzero.InstanceTypeFoundReason, "")(ms)
	}
}

func (e *env) describeCalls() int64 {
	e.t.Helper()
	st, err := e.cloud.Client.Stats(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return st.Operations["DescribeInstanceTypes"].Calls
}

// TestScaleFromZeroAnnotations drives the controller against the EC2 front with
// aws-sdk-go-v2: annotations from DescribeInstanceTypes (CPU, memory, GPU, architecture),
// answers cached, an unknown instance type, throttling and missing credentials.
func TestScaleFromZeroAnnotations(t *testing.T) {
	e := start(t)
	ctx := context.Background()

	t.Run("FromInstanceTypes", func(t *testing.T) {
		general := machineSet("general", "m6i.xlarge", credentials)
		general.Annotations = map[string]string{labelsKey: "team=blue"}
		e.create(general)
		e.create(machineSet("gpu", "g4dn.xlarge", credentials))
		e.create(machineSet("arm", "m6g.xlarge", credentials))
		e.waitFor(t, "general", annotated(map[string]string{cpuKey: "4", memoryKey: "16384", gpuKey: "0",
			labelsKey: "team=blue,kubernetes.io/arch=amd64"}))
		e.waitFor(t, "gpu", annotated(map[string]string{cpuKey: "4", memoryKey: "16384", gpuKey: "1", labelsKey: "kubernetes.io/arch=amd64"}))
		e.waitFor(t, "arm", annotated(map[string]string{cpuKey: "4", memoryKey: "16384", gpuKey: "0", labelsKey: "kubernetes.io/arch=arm64"}))
	})

	t.Run("AnswersCached", func(t *testing.T) {
		before := e.describeCalls()
		e.create(machineSet("general-b", "m6i.xlarge", credentials))
		e.waitFor(t, "general-b", annotated(map[string]string{cpuKey: "4", memoryKey: "16384"}))
		if after := e.describeCalls(); after != before {
			t.Errorf("DescribeInstanceTypes called %d more times for an instance type already described", after-before)
		}
	})

	t.Run("UnknownInstanceType", func(t *testing.T) {
		ms := e.waitFor(t, "general", annotated(nil))
		base := ms.DeepCopy()
		raw, _ := json.Marshal(map[string]any{"apiVersion": "machine.openshift.io/v1beta1", "kind": "AWSMachineProviderConfig",
			"ami": map[string]any{"id": "ami-0a8f3c6e2b1d94f57"}, "instanceType": "m9.colossal",
			"placement": map[string]any{"region": api.DefaultAWSRegion}, "credentialsSecret": map[string]any{"name": credentials}})
		ms.Spec.Template.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: raw}
		if err := e.client.Patch(ctx, ms, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
		ms = e.waitFor(t, "general", hasCondition(corev1.ConditionFalse, scalefromzero.InvalidInstanceTypeReason,
			`spec.template.spec.providerSpec.value.instanceType: Invalid value: "m9.colossal": EC2 in us-east-1 does not offer this instance type`))
		if _, ok := ms.Annotations[cpuKey]; ok || ms.Annotations[labelsKey] != "team=blue" {
			t.Errorf("annotations %v: want the capacity removed and the user's labels entry kept", ms.Annotations)
		}
	})

	t.Run("ThrottledThenAnnotated", func(t *testing.T) {
		f, err := e.cloud.Client.CreateFault(ctx, api.Fault{Kind: api.FaultThrottle, Operation: "DescribeInstanceTypes"})
		if err != nil {
			t.Fatal(err)
		}
		e.create(machineSet("compute", "c5.2xlarge", credentials))
		e.waitFor(t, "compute", hasCondition(corev1.ConditionUnknown, scalefromzero.CloudUnavailableReason, "RequestLimitExceeded"))
		if _, err := e.cloud.Client.DeleteFaults(ctx, f.FaultID); err != nil {
			t.Fatal(err)
		}
		e.waitFor(t, "compute", annotated(map[string]string{cpuKey: "8", memoryKey: "16384"}))
	})

	t.Run("CredentialsSecretMissing", func(t *testing.T) {
		e.create(machineSet("no-secret", "r5.xlarge", "missing"))
		e.waitFor(t, "no-secret", hasCondition(corev1.ConditionUnknown, scalefromzero.CloudUnavailableReason,
			"spec.template.spec.providerSpec.value.credentialsSecret: Secret default/missing not found"))
	})
}
