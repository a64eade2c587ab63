package demo

import (
	"context"
	"encoding/json"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
)

// MachineSetNames are the demo's Machine API MachineSets.
var MachineSetNames = []string{"lab-worker-a", "lab-worker-b"}

// EnsureWorkload creates the demo's Machine API MachineSets (two Machines each, in two zones)
// and a MachineHealthCheck over them, unless they exist.
func EnsureWorkload(ctx context.Context, c client.Client, cl Cluster) error {
	zones := []string{cl.Region + "a", cl.Region + "b"}
	for i, name := range MachineSetNames {
		if err := create(ctx, c, machineSet(cl, name, zones[i%len(zones)], 2)); err != nil {
			return err
		}
	}
	mhc := &machinev1beta1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: "lab-workers", Namespace: cl.MachineAPINamespace},
		Spec: machinev1beta1.MachineHealthCheckSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"machine.openshift.io/cluster-api-machine-role": "worker"}},
			UnhealthyConditions: []machinev1beta1.UnhealthyCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Timeout: metav1.Duration{Duration: 30 * time.Second}},
				{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Timeout: metav1.Duration{Duration: 30 * time.Second}},
			},
			MaxUnhealthy:       ptr.To(intstr.FromString("40%")),
			NodeStartupTimeout: &metav1.Duration{Duration: 5 * time.Minute},
		}}
	return create(ctx, c, mhc)
}

// MachineSet returns a Machine API MachineSet of the demo's shape (simulated provider, worker
// role, the cluster's user data) for zone.
func MachineSet(cl Cluster, name, zone string, replicas int32) *machinev1beta1.MachineSet {
	return machineSet(cl, name, zone, replicas)
}

func machineSet(cl Cluster, name, zone string, replicas int32) *machinev1beta1.MachineSet {
	raw, _ := json.Marshal(&infrav1.SimMachineProviderSpec{
		TypeMeta: metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: "SimMachineProviderSpec"},
		Region:   cl.Region, Zone: zone, InstanceType: "s1.medium", Image: "sim-rhcos-9",
		UserDataSecret: &corev1.LocalObjectReference{Name: UserDataSecret},
	})
	return workerMachineSet(cl.Name, cl.MachineAPINamespace, name, replicas, raw)
}

// workerMachineSet is a Machine API worker MachineSet of cluster clusterName in namespace ns
// with the installer's labels and the providerSpec raw.
func workerMachineSet(clusterName, ns, name string, replicas int32, raw []byte) *machinev1beta1.MachineSet {
	selector := map[string]string{
		"machine.openshift.io/cluster-api-cluster":    clusterName,
		"machine.openshift.io/cluster-api-machineset": name,
	}
	tmplLabels := map[string]string{
		"machine.openshift.io/cluster-api-cluster":      clusterName,
		"machine.openshift.io/cluster-api-machineset":   name,
		"machine.openshift.io/cluster-api-machine-role": "worker",
		"machine.openshift.io/cluster-api-machine-type": "worker",
	}
	return &machinev1beta1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: map[string]string{"machine.openshift.io/cluster-api-cluster": clusterName}},
		Spec: machinev1beta1.MachineSetSpec{
			Replicas: ptr.To(replicas),
			Selector: metav1.LabelSelector{MatchLabels: selector},
			Template: machinev1beta1.MachineTemplateSpec{
				ObjectMeta: machinev1beta1.ObjectMeta{Labels: tmplLabels},
				Spec: machinev1beta1.MachineSpec{
					ObjectMeta:   machinev1beta1.ObjectMeta{Labels: map[string]string{"node-role.kubernetes.io/worker": ""}},
					ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: raw}},
				},
			},
		},
	}
}
