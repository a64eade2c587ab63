package machineset

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// A Machine is created with everything its Machine controller would otherwise have to add
// in a write of its own: the finalizer, the cluster-name label and a controller owner.
func TestNewMachineIsBornWithFinalizerAndClusterLink(t *testing.T) {
	ms := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: "ns", UID: "ms-uid"},
		Spec: clusterv1.MachineSetSpec{ClusterName: "c1", Template: clusterv1.MachineTemplateSpec{
			ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"set": "workers"}}}}}
	infra := &cloneSource{target: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.machina.dev", Kind: "SimMachine"}}
	m := newMachine(ms, infra, nil)
	if !slices.Equal(m.Finalizers, []string{clusterv1.MachineFinalizer}) {
		t.Errorf("finalizers %v, want [%s]", m.Finalizers, clusterv1.MachineFinalizer)
	}
	if m.Labels[clusterv1.ClusterNameLabel] != "c1" || m.Labels["set"] != "workers" {
		t.Errorf("labels %v", m.Labels)
	}
	if ref := metav1.GetControllerOf(m); ref == nil || ref.UID != "ms-uid" || ref.Kind != "MachineSet" {
		t.Errorf("controller owner %+v, want the MachineSet", ref)
	}
	if m.Spec.InfrastructureRef.Name != m.Name || m.Spec.InfrastructureRef.Kind != "SimMachine" {
		t.Errorf("infrastructureRef %+v, want SimMachine %s", m.Spec.InfrastructureRef, m.Name)
	}
}
