package lab_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	capav1 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/config/crd"
	"github.com/machina-dev/machina/internal/lab/labtest"
	"github.com/machina-dev/machina/internal/scheme"
)

const ns = "default"

func simProviderSpec(t *testing.T) *runtime.RawExtension {
	t.Helper()
	ps := &infrav1.SimMachineProviderSpec{
		TypeMeta:     metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: "SimMachineProviderSpec"},
		Region:       "sim-east-1",
		Zone:         "sim-east-1a",
		InstanceType: "s1.large",
		Image:        "sim-rhcos-9",
	}
	return &runtime.RawExtension{Object: ps}
}

func ref(kind, name string) clusterv1.ContractVersionedObjectReference {
	return clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupName, Kind: kind, Name: name}
}

// objects returns one valid object of every kind the lab installs.
func objects(t *testing.T) []client.Object {
	labels := map[string]string{"app": "crud"}
	masters := map[string]string{"machine.openshift.io/cluster-api-machine-role": "master", "machine.openshift.io/cluster-api-machine-type": "master",
		"machine.openshift.io/cluster-api-cluster": "crud"}
	mapiSpec := machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: simProviderSpec(t)}}
	capiMachineSpec := clusterv1.MachineSpec{
		ClusterName:       "crud",
		InfrastructureRef: ref("SimMachine", "crud"),
		Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("crud-bootstrap")},
	}
	instance := infrav1.InstanceSpec{InstanceType: "s1.large", Image: "sim-rhcos-9"}
	return []client.Object{
		&configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
			Spec: configv1.InfrastructureSpec{PlatformSpec: configv1.PlatformSpec{Type: configv1.NonePlatformType}}},
		&configv1.FeatureGate{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}},
		&configv1.ClusterVersion{ObjectMeta: metav1.ObjectMeta{Name: "version"},
			Spec: configv1.ClusterVersionSpec{ClusterID: "5b0e8a3c-2f6d-4d7e-9a51-3c2e8f1b7a90"}},
		&configv1.ClusterOperator{ObjectMeta: metav1.ObjectMeta{Name: "machine-api"}},
		&machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "crud", Namespace: ns}, Spec: mapiSpec},
		&machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "crud", Namespace: ns},
			Spec: machinev1beta1.MachineSetSpec{
				Replicas: ptr.To[int32](0),
				Selector: metav1.LabelSelector{MatchLabels: labels},
				Template: machinev1beta1.MachineTemplateSpec{
					ObjectMeta: machinev1beta1.ObjectMeta{Labels: labels}, Spec: mapiSpec},
			}},
		&machinev1.ControlPlaneMachineSet{ObjectMeta: metav1.ObjectMeta{Name: "cluster", Namespace: ns},
			Spec: machinev1.ControlPlaneMachineSetSpec{
				Replicas: ptr.To[int32](3),
				Selector: metav1.LabelSelector{MatchLabels: masters},
				Template: machinev1.ControlPlaneMachineSetTemplate{
					MachineType: machinev1.OpenShiftMachineV1Beta1MachineType,
					OpenShiftMachineV1Beta1Machine: &machinev1.OpenShiftMachineV1Beta1MachineTemplate{
						ObjectMeta: machinev1.ControlPlaneMachineSetTemplateObjectMeta{Labels: masters}, Spec: mapiSpec}},
			}},
		&machinev1beta1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: "crud", Namespace: ns},
			Spec: machinev1beta1.MachineHealthCheckSpec{
				Selector: metav1.LabelSelector{MatchLabels: labels},
				UnhealthyConditions: []machinev1beta1.UnhealthyCondition{
					{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Timeout: metav1.Duration{Duration: 5 * time.Minute}}},
				MaxUnhealthy: ptr.To(intstr.FromString("40%")),
			}},
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "crud", Namespace: ns},
			Spec: clusterv1.ClusterSpec{InfrastructureRef: ref("SimCluster", "crud")}},
		&clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "crud", Namespace: ns}, Spec: capiMachineSpec},
		&clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "crud", Namespace: ns},
			Spec: clusterv1.MachineSetSpec{
				ClusterName: "crud", Replicas: ptr.To[int32](0),
				Selector: metav1.LabelSelector{MatchLabels: labels},
				Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: labels}, Spec: capiMachineSpec},
			}},
		&clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "crud", Namespace: ns},
			Spec: clusterv1.MachineDeploymentSpec{
				ClusterName: "crud", Replicas: ptr.To[int32](0),
				Selector: metav1.LabelSelector{MatchLabels: labels},
				Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: labels}, Spec: capiMachineSpec},
			}},
		&clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: "crud", Namespace: ns},
			Spec: clusterv1.MachinePoolSpec{
				ClusterName: "crud", Replicas: ptr.To[int32](1),
				Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{
					ClusterName: "crud", InfrastructureRef: ref("SimMachinePool", "crud"),
					Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("crud-bootstrap")}}},
			}},
		&clusterv1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: "crud", Namespace: ns},
			Spec: clusterv1.MachineHealthCheckSpec{ClusterName: "crud", Selector: metav1.LabelSelector{MatchLabels: labels}}},
		&clusterv1.MachineDrainRule{ObjectMeta: metav1.ObjectMeta{Name: "crud", Namespace: ns},
			Spec: clusterv1.MachineDrainRuleSpec{
				Drain:    clusterv1.MachineDrainRuleDrainConfig{Behavior: clusterv1.MachineDrainRuleDrainBehaviorSkip},
				Machines: []clusterv1.MachineDrainRuleMachineSelector{{Selector: &metav1.LabelSelector{MatchLabels: labels}}},
			}},
		&clusterv1.ClusterClass{ObjectMeta: metav1.ObjectMeta{Name: "crud", Namespace: ns},
			Spec: clusterv1.ClusterClassSpec{
				Infrastructure: clusterv1.InfrastructureClass{TemplateRef: clusterv1.ClusterClassTemplateReference{
					APIVersion: infrav1.GroupVersion.String(), Kind: "SimClusterTemplate", Name: "crud"}},
				ControlPlane: clusterv1.ControlPlaneClass{TemplateRef: clusterv1.ClusterClassTemplateReference{
					APIVersion: "controlplane.cluster.x-k8s.io/v1beta2", Kind: "KubeadmControlPlaneTemplate", Name: "crud"}},
			}},
		&infrav1.SimCluster{ObjectMeta: metav1.ObjectMeta{Name: "crud", Namespace: ns},
			Spec: infrav1.SimClusterSpec{Region: "sim-east-1"}},
		&infrav1.SimMachine{ObjectMeta: metav1.ObjectMeta{Name: "crud", Namespace: ns},
			Spec: infrav1.SimMachineSpec{InstanceSpec: instance}},
		&infrav1.SimMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: "crud", Namespace: ns},
			Spec: infrav1.SimMachineTemplateSpec{Template: infrav1.SimMachineTemplateResource{
				Spec: infrav1.SimMachineSpec{InstanceSpec: instance}}}},
		&infrav1.SimMachinePool{ObjectMeta: metav1.ObjectMeta{Name: "crud", Namespace: ns},
			Spec: infrav1.SimMachinePoolSpec{Template: instance}},
		&capav1.AWSCluster{ObjectMeta: metav1.ObjectMeta{Name: "crud", Namespace: ns},
			Spec: capav1.AWSClusterSpec{Region: "us-east-1"}},
		&capav1.AWSMachine{ObjectMeta: metav1.ObjectMeta{Name: "crud", Namespace: ns}, Spec: awsSpec},
		&capav1.AWSMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: "crud", Namespace: ns},
			Spec: capav1.AWSMachineTemplateSpec{Template: capav1.AWSMachineTemplateResource{Spec: awsSpec}}},
	}
}

// awsSpec is a minimal AWSMachine spec CAPA's CRD admits.
var awsSpec = capav1.AWSMachineSpec{InstanceType: "m6i.xlarge", AMI: capav1.AMIReference{ID: ptr.To("ami-0a1b2c3d4e5f67890")}}

// TestEveryKindCreateReadDelete starts a lab and round-trips one object of every kind it
// serves, proving the installed CRDs are the real schemas and the scheme matches them.
func TestEveryKindCreateReadDelete(t *testing.T) {
	l := labtest.Start(t)
	ctx := context.Background()
	c, err := client.New(l.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	checkAPIServerGC(ctx, t, kubernetes.NewForConfigOrDie(l.Config), false)

	crds, err := crd.All()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	objs := objects(t)
	for _, o := range objs {
		gvk, err := c.GroupVersionKindFor(o)
		if err != nil {
			t.Fatal(err)
		}
		kinds[gvk.GroupKind().String()] = true
		t.Run(gvk.GroupKind().String(), func(t *testing.T) {
			if err := c.Create(ctx, o); err != nil {
				t.Fatalf("create %s: %v", gvk.Kind, err)
			}
			got := o.DeepCopyObject().(client.Object)
			if err := c.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
				t.Fatalf("get %s: %v", gvk.Kind, err)
			}
			if got.GetUID() == "" || got.GetUID() != o.GetUID() {
				t.Fatalf("get %s returned a different object", gvk.Kind)
			}
			if err := c.Delete(ctx, got); err != nil {
				t.Fatalf("delete %s: %v", gvk.Kind, err)
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(o), got); !apierrors.IsNotFound(err) {
				t.Fatalf("%s still readable after delete: %v", gvk.Kind, err)
			}
		})
	}
	for _, cr := range crds {
		gk := cr.Spec.Names.Kind + "." + cr.Spec.Group
		if !kinds[gk] {
			t.Errorf("no create/read/delete case for installed kind %s", gk)
		}
	}

	t.Run("MachineAuthoritativeAPI", func(t *testing.T) {
		m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "authority", Namespace: ns},
			Spec: machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: simProviderSpec(t)}}}
		if err := c.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		if m.Spec.AuthoritativeAPI != machinev1beta1.MachineAuthorityMachineAPI {
			t.Errorf("spec.authoritativeAPI defaulted to %q, want MachineAPI", m.Spec.AuthoritativeAPI)
		}
		m.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
		if err := c.Update(ctx, m); err != nil {
			t.Fatalf("setting ClusterAPI: %v", err)
		}
		m.Spec.AuthoritativeAPI = "Bogus"
		err := c.Update(ctx, m)
		if !apierrors.IsInvalid(err) {
			t.Fatalf("an invalid authority was not refused as Invalid: %v", err)
		}
		for _, want := range []string{`spec.authoritativeAPI`, `Unsupported value: "Bogus"`, `"MachineAPI"`, `"ClusterAPI"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("apiserver error %q lacks %q", err, want)
			}
		}
		m.Status.AuthoritativeAPI = machinev1beta1.MachineAuthorityMigrating
		m.Status.SynchronizedGeneration = 1
		m.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
		if err := c.Status().Update(ctx, m); err != nil {
			t.Fatalf("status.authoritativeAPI Migrating and synchronizedGeneration refused: %v", err)
		}
		if m.Status.AuthoritativeAPI != machinev1beta1.MachineAuthorityMigrating || m.Status.SynchronizedGeneration != 1 {
			t.Errorf("status not stored: %+v", m.Status)
		}
	})

	t.Run("KubeconfigFile", func(t *testing.T) {
		b, err := os.ReadFile(l.KubeconfigPath)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.RESTConfigFromKubeConfig(b)
		if err != nil {
			t.Fatal(err)
		}
		kc, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		var list machinev1beta1.MachineList
		if err := kc.List(ctx, &list, client.InNamespace(ns)); err != nil {
			t.Fatalf("listing Machines with the written kubeconfig: %v", err)
		}
	})
}
