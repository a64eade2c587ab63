package clusterapi_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/machine"
)

// testManagerNodeProtected: the Machine whose Node runs the manager (NODE_NAME, from the
// downward API in a cluster) is not drained, its InfraMachine and Node are not deleted, until
// it carries the override annotation.
func testManagerNodeProtected(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	newMachine(t, e, "main", "manager-host", nil)
	m := waitPhase(t, e, "manager-host", clusterv1.MachinePhaseRunning, 60*time.Second)
	nodeName := m.Status.NodeRef.Name
	sm, _ := getSimMachine(ctx, e, "manager-host")

	// Cleanups run last first: the manager restarts without NODE_NAME after it is unset.
	t.Cleanup(func() { e.StopManager(); e.StartManager() })
	t.Setenv(machine.NodeNameEnv, nodeName)
	e.StopManager()
	e.StartManager()

	if err := e.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	m = waitDeleting(t, e, "manager-host", machine.ManagerNodeProtectedReason)
	want := "Node " + nodeName + " runs the machina manager: the Machine is not drained or deleted under it and the Node is not deleted; " +
		"move the manager elsewhere, or add the annotation machina.dev/allow-manager-node-deletion to delete it anyway"
	if got := condition(m.Status.Conditions, clusterv1.MachineDeletingCondition); got != "True/"+machine.ManagerNodeProtectedReason+": "+want {
		t.Errorf("Deleting %q, want the reason %s and %q", got, machine.ManagerNodeProtectedReason, want)
	}
	time.Sleep(2 * time.Second) // a pass that would go on has had time to
	var node corev1.Node
	if err := e.Client.Get(ctx, client.ObjectKey{Name: nodeName}, &node); err != nil || node.Spec.Unschedulable || !node.DeletionTimestamp.IsZero() {
		t.Fatalf("the manager's Node must be left alone (not cordoned or deleted): %v unschedulable=%v", err, node.Spec.Unschedulable)
	}
	if insts := instances(e, sm); len(insts) != 1 || insts[0].State != api.StateRunning {
		t.Fatalf("the manager's instance must keep running: %+v", insts)
	}
	if s, err := getSimMachine(ctx, e, "manager-host"); err != nil || !s.DeletionTimestamp.IsZero() {
		t.Fatalf("the SimMachine must not be deleted: %v", err)
	}
	if got := machineEventMessage(t, e, "manager-host", machine.ManagerNodeProtectedReason); got != want {
		t.Errorf("%s event %q, want %q", machine.ManagerNodeProtectedReason, got, want)
	}

	patchMachine(t, e, "manager-host", func(m *clusterv1.Machine) {
		m.Annotations = map[string]string{machine.AllowManagerNodeDeletionAnnotation: "true"}
	})
	waitGone(t, e, m, 60*time.Second)
	if err := e.Client.Get(ctx, client.ObjectKey{Name: nodeName}, &corev1.Node{}); err == nil {
		t.Errorf("Node %s still there after the override", nodeName)
	}
}
