package nodelink

import (
	"context"
	"fmt"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/machina-dev/machina/internal/scheme"
)

func nodeAt(name, providerID, ip string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}}}
}

// A change of a Machine brings back the Node that shares its internal IP when no Node has
// its provider ID (Nodes on such platforms carry none), unless the Machine is being deleted;
// a Node with its provider ID is the only one brought back.
func TestMachineToNodesByInternalIP(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).
		WithObjects(nodeAt("by-ip", "", "10.0.0.7"), nodeAt("other", "", "10.0.0.8"), nodeAt("by-id", "sim:///i-2", "10.0.0.9")).
		WithIndex(&corev1.Node{}, nodeProviderIDIndex, func(o client.Object) []string { return nonEmpty(o.(*corev1.Node).Spec.ProviderID) }).
		WithIndex(&corev1.Node{}, nodeInternalIPIndex, func(o client.Object) []string { return nodeIPs(o.(*corev1.Node)) }).
		Build()
	r := &Reconciler{Client: c}
	machineAt := func(providerID, ip string) *machinev1beta1.Machine {
		m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m"},
			Status: machinev1beta1.MachineStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}}}
		if providerID != "" {
			m.Spec.ProviderID = ptr.To(providerID)
		}
		return m
	}
	deleting := machineAt("", "10.0.0.7")
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	for name, tc := range map[string]struct {
		m    *machinev1beta1.Machine
		want string
	}{
		"by IP":                         {machineAt("", "10.0.0.7"), "[by-ip]"},
		"provider ID with no Node, IP":  {machineAt("sim:///i-1", "10.0.0.7"), "[by-ip]"},
		"provider ID first":             {machineAt("sim:///i-2", "10.0.0.7"), "[by-id]"},
		"no Node shares the IP":         {machineAt("", "10.0.0.1"), "[]"},
		"being deleted: not IP-matched": {deleting, "[]"},
	} {
		var got []string
		for _, req := range r.machineToNodes(context.Background(), tc.m) {
			got = append(got, req.Name)
		}
		if fmt.Sprint(got) != tc.want {
			t.Errorf("%s: Nodes %v, want %s", name, got, tc.want)
		}
	}
}
