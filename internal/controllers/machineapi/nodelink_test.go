package machineapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/machineapi/machine"
)

// A Node without a provider ID is linked to the Machine that shares its internal IP; a
// Machine taint whose key and effect the Node already has (with another value) does not
// stop the link, and the Machine's spec.metadata annotations reach the Node. The Machine is
// of a platform the simulated actuator does not serve, so only NodeLink acts on it.
func testNodeLinkByIP(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	const ip = "10.250.0.7"
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "nodelink-ip"},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "dedicated", Value: "red", Effect: corev1.TaintEffectNoSchedule}}}}
	if err := e.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), node) })
	base := node.DeepCopy()
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
	if err := e.Client.Status().Patch(ctx, node, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "nodelink-ip", Namespace: ns},
		Spec: machinev1beta1.MachineSpec{
			ObjectMeta: machinev1beta1.ObjectMeta{Labels: map[string]string{"team": "green"}, Annotations: map[string]string{"owner": "team-green"}},
			Taints: []corev1.Taint{{Key: "dedicated", Value: "green", Effect: corev1.TaintEffectNoSchedule},
				{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}},
			ProviderSpec: machinev1beta1.ProviderSpec{Value: rawJSON(map[string]any{
				"apiVersion": "machine.openshift.io/v1beta1", "kind": "AWSMachineProviderConfig",
				"ami": map[string]any{"id": "ami-0123456789"}, "placement": map[string]any{"region": "us-east-1", "availabilityZone": "us-east-1a"}})},
		}}
	create(t, e, m)
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), m) })
	mbase := m.DeepCopy()
	m.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
	if err := e.Client.Status().Patch(ctx, m, client.MergeFrom(mbase)); err != nil {
		t.Fatal(err)
	}
	e.Eventually(30*time.Second, "Machine linked to its Node by IP", func(ctx context.Context) (bool, string, error) {
		got, err := get(ctx, e, m.Name)
		if err != nil {
			return false, err.Error(), nil
		}
		return got.Status.NodeRef != nil && got.Status.NodeRef.Name == node.Name, fmt.Sprintf("nodeRef %v", got.Status.NodeRef), nil
	})
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
		t.Fatal(err)
	}
	if node.Annotations[machine.NodeMachineAnnotation] != ns+"/nodelink-ip" || node.Annotations["owner"] != "team-green" || node.Labels["team"] != "green" {
		t.Errorf("Node annotations %v labels %v", node.Annotations, node.Labels)
	}
	var dedicated, gpu []string
	for _, taint := range node.Spec.Taints {
		switch taint.Key {
		case "dedicated":
			dedicated = append(dedicated, taint.ToString())
		case "gpu":
			gpu = append(gpu, taint.ToString())
		}
	}
	if fmt.Sprint(dedicated) != "[dedicated=red:NoSchedule]" || fmt.Sprint(gpu) != "[gpu:NoSchedule]" {
		t.Errorf("taints %v: want the Node's dedicated=red:NoSchedule kept and gpu:NoSchedule added", node.Spec.Taints)
	}
}

func rawJSON(v map[string]any) *runtime.RawExtension {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return &runtime.RawExtension{Raw: b}
}
